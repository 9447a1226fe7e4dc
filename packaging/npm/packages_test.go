// Package npm_test checks orchestra's npm packages: the launcher package
// @orchestra-mcp/orchestra (orchestra/) and the package of each platform's
// binary that pack.mjs makes from a release build.
//
// The tests of packed packages install the tarballs of a snapshot release
// into an empty project with no registry and run them as MCP clients and
// users do; they need the release's dist/ directory:
//
//	ORCHESTRA_NPM_DIST=$PWD/dist go test ./packaging/npm
//
// .ci/dist.sh builds the snapshot and runs them so. Without
// ORCHESTRA_NPM_DIST they skip.
package npm_test

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"
)

// nodePlatforms and nodeArchs are Node's names (process.platform,
// process.arch) of Go's GOOS and GOARCH.
var (
	nodePlatforms = map[string]string{"darwin": "darwin", "linux": "linux", "windows": "win32"}
	nodeArchs     = map[string]string{"amd64": "x64", "arm64": "arm64"}
)

// launcherPackage is the part of orchestra/package.json the tests read.
type launcherPackage struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Bin                  map[string]string `json:"bin"`
	Scripts              map[string]string `json:"scripts"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
}

func readLauncherPackage(t *testing.T, path string) launcherPackage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p launcherPackage
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// hook is a build hook of .goreleaser.yaml.
type hook struct {
	Cmd string `yaml:"cmd"`
}

// TestPlatformPackagesCoverTheRelease: every target the release builds has
// a platform package among the launcher's optional dependencies, named as
// the launcher looks for it (NAME-PLATFORM-ARCH in Node's names), and each
// build packs one.
func TestPlatformPackagesCoverTheRelease(t *testing.T) {
	data, err := os.ReadFile("../../.goreleaser.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rc struct {
		Builds []struct {
			ID     string   `yaml:"id"`
			Goos   []string `yaml:"goos"`
			Goarch []string `yaml:"goarch"`
			Hooks  struct {
				Post []hook `yaml:"post"`
			} `yaml:"hooks"`
		} `yaml:"builds"`
	}
	if err := yaml.Unmarshal(data, &rc); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	p := readLauncherPackage(t, "orchestra/package.json")
	var want []string
	for _, b := range rc.Builds {
		packs := slices.ContainsFunc(b.Hooks.Post, func(h hook) bool {
			return strings.HasPrefix(h.Cmd, "node packaging/npm/pack.mjs {{ .Path }} {{ .Os }} {{ .Arch }} {{ .Version }} ")
		})
		if !packs {
			t.Errorf(".goreleaser.yaml: build %s does not pack its binary with packaging/npm/pack.mjs", b.ID)
		}
		if b.ID != "orchestra" {
			continue // the CI build of one target
		}
		for _, goos := range b.Goos {
			for _, goarch := range b.Goarch {
				platform, arch := nodePlatforms[goos], nodeArchs[goarch]
				if platform == "" || arch == "" {
					t.Errorf(".goreleaser.yaml builds %s/%s, which has no Node platform here or in pack.mjs", goos, goarch)
					continue
				}
				want = append(want, p.Name+"-"+platform+"-"+arch)
			}
		}
	}
	slices.Sort(want)
	got := slices.Sorted(maps.Keys(p.OptionalDependencies))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("orchestra/package.json optionalDependencies differ from the release's targets (-release +package):\n%s", diff)
	}
	if len(p.Scripts) > 0 {
		t.Errorf("orchestra/package.json has scripts %v: the launcher package runs nothing at install", p.Scripts)
	}
}
