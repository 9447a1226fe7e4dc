package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// The parts of .goreleaser.yaml the install sections show.
type releaseConfig struct {
	ProjectName string `yaml:"project_name"`
	Builds      []struct {
		ID      string   `yaml:"id"`
		Env     []string `yaml:"env"`
		Flags   []string `yaml:"flags"`
		Tags    []string `yaml:"tags"`
		Ldflags []string `yaml:"ldflags"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Hooks   struct {
			Post []struct {
				Cmd string `yaml:"cmd"`
			} `yaml:"post"`
		} `yaml:"hooks"`
	} `yaml:"builds"`
	Archives []struct {
		Formats         []string `yaml:"formats"`
		FormatOverrides []struct {
			Goos    string   `yaml:"goos"`
			Formats []string `yaml:"formats"`
		} `yaml:"format_overrides"`
		NameTemplate string `yaml:"name_template"`
	} `yaml:"archives"`
	Brews []struct {
		Name       string `yaml:"name"`
		Repository struct {
			Owner string `yaml:"owner"`
			Name  string `yaml:"name"`
		} `yaml:"repository"`
	} `yaml:"brews"`
}

func readReleaseConfig(t *testing.T) releaseConfig {
	t.Helper()
	data, err := os.ReadFile(".goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rc releaseConfig
	if err := yaml.Unmarshal(data, &rc); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if len(rc.Builds) == 0 || len(rc.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml: want builds and one archive, got %d and %d", len(rc.Builds), len(rc.Archives))
	}
	return rc
}

// fillName expands a GoReleaser name template for one target, leaving the
// version as VERSION.
func fillName(tmpl, project, goos, goarch string) string {
	return strings.NewReplacer("{{ .ProjectName }}", project, "{{ .Version }}", "VERSION",
		"{{ .Os }}", goos, "{{ .Arch }}", goarch).Replace(tmpl)
}

// releaseBuildCommand is the go build command line of a release build.
func releaseBuildCommand(rc releaseConfig) string {
	b := rc.Builds[0]
	return fmt.Sprintf(`%s go build %s -tags %s -ldflags "%s" -o orchestra .`,
		strings.Join(b.Env, " "), strings.Join(b.Flags, " "), strings.Join(b.Tags, ","),
		strings.ReplaceAll(strings.Join(b.Ldflags, " "), "{{ .Version }}", "VERSION"))
}

var bundleOutRE = regexp.MustCompile(`dist/.*\.mcpb$`)

// installSections are the README's generated install sections: the
// release files (.goreleaser.yaml), the bundle's settings
// (packaging/mcpb/manifest.json) and the container (Dockerfile).
func installSections(t *testing.T) map[string]string {
	t.Helper()
	rc := readReleaseConfig(t)
	b := rc.Builds[0]
	a := rc.Archives[0]
	hook := ""
	if len(b.Hooks.Post) > 0 {
		hook = b.Hooks.Post[0].Cmd
	}
	bundle := bundleOutRE.FindString(hook)
	if bundle == "" {
		t.Fatalf(".goreleaser.yaml: the build's post hook %q makes no .mcpb", hook)
	}
	bundle = strings.TrimPrefix(bundle, "dist/")

	var files strings.Builder
	files.WriteString("| OS | arch | archive | MCP Bundle |\n|---|---|---|---|\n")
	for _, goos := range b.Goos {
		format := a.Formats[0]
		for _, o := range a.FormatOverrides {
			if o.Goos == goos {
				format = o.Formats[0]
			}
		}
		for _, goarch := range b.Goarch {
			fmt.Fprintf(&files, "| %s | %s | `%s.%s` | `%s` |\n", goos, goarch,
				fillName(a.NameTemplate, rc.ProjectName, goos, goarch), format, fillName(bundle, rc.ProjectName, goos, goarch))
		}
	}
	fmt.Fprintf(&files, "\nwith `checksums.txt` (SHA-256 of every file). Each binary is built as\n\n```sh\n%s\n```\n", releaseBuildCommand(rc))

	data, err := os.ReadFile("packaging/mcpb/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Server struct {
			MCPConfig struct {
				Args []string          `json:"args"`
				Env  map[string]string `json:"env"`
			} `json:"mcp_config"`
		} `json:"server"`
		UserConfig map[string]struct {
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Sensitive   bool   `json:"sensitive"`
		} `json:"user_config"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("packaging/mcpb/manifest.json: %v", err)
	}
	var mcpb strings.Builder
	mcpb.WriteString("| setting | what it is | passed as |\n|---|---|---|\n")
	keys := make([]string, 0, len(m.UserConfig))
	for k := range m.UserConfig {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c := m.UserConfig[k]
		var vars []string
		for name, v := range m.Server.MCPConfig.Env {
			if v == "${user_config."+k+"}" {
				vars = append(vars, "`"+name+"`")
			}
		}
		slices.Sort(vars)
		kind := c.Type
		if c.Sensitive {
			kind += ", kept secret"
		}
		fmt.Fprintf(&mcpb, "| %s (%s) | %s | %s |\n", c.Title, kind, c.Description, strings.Join(vars, ", "))
	}
	fmt.Fprintf(&mcpb, "\nThe bundle runs `orchestra %s` (stdio).\n", strings.Join(m.Server.MCPConfig.Args, " "))

	sections := map[string]string{"downloads": files.String(), "bundle": mcpb.String()}
	sections["container"] = containerSection(t, rc)
	sections["packages"], sections["client_config"] = packageSections(t, rc)
	return sections
}

// packageSections are the README's lines that install orchestra from npm
// (packaging/npm/orchestra/package.json) and Homebrew (the formula of
// .goreleaser.yaml), and the configuration of each MCP client, which runs
// it with npx.
func packageSections(t *testing.T, rc releaseConfig) (packages, clients string) {
	t.Helper()
	data, err := os.ReadFile("packaging/npm/orchestra/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Name                 string            `json:"name"`
		Bin                  map[string]string `json:"bin"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		t.Fatalf("packaging/npm/orchestra/package.json: %v", err)
	}
	if _, ok := pkg.Bin[rc.ProjectName]; !ok || len(pkg.Bin) != 1 {
		t.Fatalf("packaging/npm/orchestra/package.json: bin %v, want %s alone (npx runs a package's only bin)", pkg.Bin, rc.ProjectName)
	}
	if len(rc.Brews) != 1 {
		t.Fatalf(".goreleaser.yaml: want one Homebrew formula, got %d", len(rc.Brews))
	}
	brew := rc.Brews[0]
	tap, ok := strings.CutPrefix(brew.Repository.Name, "homebrew-")
	if !ok {
		t.Fatalf(".goreleaser.yaml: the tap %q is not named homebrew-NAME, which brew needs to find it as OWNER/NAME", brew.Repository.Name)
	}
	npx := []string{"-y", pkg.Name, "serve"}
	var b strings.Builder
	fmt.Fprintf(&b, "```sh\nnpx %s    # runs orchestra: the line MCP clients are given below\n", strings.Join(npx, " "))
	fmt.Fprintf(&b, "npm install -g %s   # or puts %s on your PATH\n", pkg.Name, rc.ProjectName)
	fmt.Fprintf(&b, "brew install %s/%s/%s  # Homebrew, on macOS and Linux\n```\n", brew.Repository.Owner, tap, brew.Name)
	names := slices.Sorted(maps.Keys(pkg.OptionalDependencies))
	for i, n := range names {
		names[i] = "`" + n + "`"
	}
	fmt.Fprintf(&b, "\n`%s` holds a launcher of a few lines; the binary comes in the package of your platform, which npm picks\namong the launcher's optional dependencies: %s.\n", pkg.Name, strings.Join(names, ", "))
	packages = b.String()

	// A client's JSON configuration, with the arguments on one line as
	// people write them.
	args, err := json.Marshal(npx)
	if err != nil {
		t.Fatal(err)
	}
	snippet := func(servers, typ string) string {
		if typ != "" {
			typ = fmt.Sprintf("\n      \"type\": %q,", typ)
		}
		conf := fmt.Sprintf("{\n  %q: {\n    %q: {%s\n      \"command\": \"npx\",\n      \"args\": %s\n    }\n  }\n}\n",
			servers, rc.ProjectName, typ, strings.ReplaceAll(string(args), `","`, `", "`))
		if !json.Valid([]byte(conf)) {
			t.Fatalf("the client configuration is not JSON:\n%s", conf)
		}
		return "```json\n" + conf + "```\n"
	}
	b.Reset()
	fmt.Fprintf(&b, "**Claude Desktop** (`claude_desktop_config.json`; or the MCP Bundle above):\n\n%s\n", snippet("mcpServers", ""))
	fmt.Fprintf(&b, "**Claude Code**:\n\n```sh\nclaude mcp add %s -- npx %s\n```\n\n", rc.ProjectName, strings.Join(npx, " "))
	fmt.Fprintf(&b, "**VS Code** (`.vscode/mcp.json` in a workspace, or *MCP: Open User Configuration*):\n\n%s\n", snippet("servers", "stdio"))
	fmt.Fprintf(&b, "**Cursor** (`~/.cursor/mcp.json`, or `.cursor/mcp.json` in a project):\n\n%s", snippet("mcpServers", ""))
	return packages, b.String()
}

// containerSection describes the image the Dockerfile makes, and checks
// that it builds orchestra as a release does.
func containerSection(t *testing.T, rc releaseConfig) string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var base, user, expose, entry, cmd, build string
	env := map[string]string{}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "FROM":
			base, _, _ = strings.Cut(rest, " ")
		case "USER":
			user = rest
		case "EXPOSE":
			expose = rest
		case "ENTRYPOINT":
			entry = rest
		case "CMD":
			cmd = rest
		case "ENV":
			k, v, _ := strings.Cut(rest, "=")
			env[k] = v
		case "RUN":
			if strings.Contains(rest, " go build ") {
				build = rest
			}
		}
	}
	// The image's binary is a release binary: same environment, flags,
	// tags and linker flags.
	want := strings.Replace(releaseBuildCommand(rc), "-o orchestra", "-o /out/orchestra", 1)
	got := strings.ReplaceAll(build, "${VERSION}", "VERSION")
	if got != want {
		t.Errorf("the Dockerfile builds orchestra with\n\t%s\nbut a release builds it with\n\t%s", got, want)
	}
	var args []string
	for _, list := range []string{entry, cmd} {
		var l []string
		if err := json.Unmarshal([]byte(list), &l); err != nil {
			t.Fatalf("Dockerfile: ENTRYPOINT and CMD must be JSON lists: %q: %v", list, err)
		}
		args = append(args, l...)
	}
	conf, err := os.ReadFile("packaging/container/orchestra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Server struct {
			Auth struct {
				TokensEnv string `yaml:"tokens_env"`
			} `yaml:"auth"`
		} `yaml:"server"`
	}
	if err := yaml.Unmarshal(conf, &cfg); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The image is `%s` (no shell, no libc) running as user `%s`: `%s` on port %s.\n",
		base, user, strings.Join(args, " "), expose)
	fmt.Fprintf(&b, "`ORCHESTRA_CONFIG` is `%s`, which is `packaging/container/orchestra.yaml`:\n\n```yaml\n%s```\n", env["ORCHESTRA_CONFIG"], conf)
	fmt.Fprintf(&b, "\nso the accepted bearer tokens come from `%s` (comma-separated) and orchestra does not start without one.\n", cfg.Server.Auth.TokensEnv)
	return b.String()
}
