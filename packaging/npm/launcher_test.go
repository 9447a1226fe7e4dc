//go:build linux

package npm_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// release is what a snapshot release's dist/ holds for this platform.
type release struct {
	version    string // the release's version, as the binary prints it
	npmVersion string // the packages' version: npm drops build metadata
	launcher   string // the launcher package's tarball
	platform   string // this platform's package's tarball
	target     string // this platform in Node's names, "linux-x64"
}

// snapshot finds the packed packages of the release in
// $ORCHESTRA_NPM_DIST, or skips the test without it.
func snapshot(t *testing.T) release {
	t.Helper()
	dist := os.Getenv("ORCHESTRA_NPM_DIST")
	if dist == "" {
		t.Skip("set ORCHESTRA_NPM_DIST to a snapshot release's dist/ directory (bash .ci/dist.sh does)")
	}
	data, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s/metadata.json: %v", dist, err)
	}
	r := release{version: meta.Version, target: nodePlatforms[runtime.GOOS] + "-" + nodeArchs[runtime.GOARCH]}
	r.npmVersion, _, _ = strings.Cut(meta.Version, "+")
	r.launcher = filepath.Join(dist, "npm", "orchestra-mcp-orchestra-"+r.npmVersion+".tgz")
	r.platform = filepath.Join(dist, "npm", "orchestra-mcp-orchestra-"+r.target+"-"+r.npmVersion+".tgz")
	for _, f := range []string{r.launcher, r.platform} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the release has no package tarball: %v", err)
		}
	}
	for _, tool := range []string{"node", "npm", "npx"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	return r
}

// install makes an empty project and installs tarballs into it with npm,
// with no registry to reach: npm runs offline with an empty cache, and
// its registry is a closed port. The project's .npmrc says so, so npx
// started there (also by an MCP client) is offline too.
func install(t *testing.T, tarballs ...string) string {
	t.Helper()
	dir := t.TempDir()
	npmrc := fmt.Sprintf("offline=true\nregistry=http://127.0.0.1:9/\ncache=%s\naudit=false\nfund=false\nupdate-notifier=false\n", filepath.Join(dir, ".npm-cache"))
	if err := os.WriteFile(filepath.Join(dir, ".npmrc"), []byte(npmrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "launcher-test", "private": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("npm", append([]string{"install", "--loglevel=error"}, tarballs...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s: %v\n%s", strings.Join(tarballs, " "), err, out)
	}
	return dir
}

// TestPackedPackages: the packages carry no install script, the platform
// package is limited to its platform, and every version is the release's.
func TestPackedPackages(t *testing.T) {
	r := snapshot(t)
	dir := install(t, r.launcher, r.platform)
	modules := filepath.Join(dir, "node_modules", "@orchestra-mcp")
	launcher := readLauncherPackage(t, filepath.Join(modules, "orchestra", "package.json"))
	if launcher.Version != r.npmVersion || len(launcher.Scripts) > 0 || launcher.Bin["orchestra"] != "bin/orchestra.js" {
		t.Errorf("launcher package: version %q, scripts %v, bin %v; want version %q, no scripts, bin orchestra", launcher.Version, launcher.Scripts, launcher.Bin, r.npmVersion)
	}
	for name, v := range launcher.OptionalDependencies {
		if v != r.npmVersion {
			t.Errorf("the launcher depends on %s@%s, not the release's %s", name, v, r.npmVersion)
		}
	}
	data, err := os.ReadFile(filepath.Join(modules, "orchestra-"+r.target, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var platform struct {
		Version string            `json:"version"`
		OS      []string          `json:"os"`
		CPU     []string          `json:"cpu"`
		Scripts map[string]string `json:"scripts"`
	}
	if err := json.Unmarshal(data, &platform); err != nil {
		t.Fatal(err)
	}
	want := []string{nodePlatforms[runtime.GOOS], nodeArchs[runtime.GOARCH]}
	if got := []string{strings.Join(platform.OS, ","), strings.Join(platform.CPU, ",")}; !slices.Equal(got, want) || platform.Version != r.npmVersion || len(platform.Scripts) > 0 {
		t.Errorf("platform package: os/cpu %v, version %q, scripts %v; want %v, %q, none", got, platform.Version, platform.Scripts, want, r.npmVersion)
	}
}

// TestNpxVersion: npx runs the installed launcher, which runs the
// release's binary.
func TestNpxVersion(t *testing.T) {
	r := snapshot(t)
	dir := install(t, r.launcher, r.platform)
	cmd := exec.Command("npx", "-y", "@orchestra-mcp/orchestra", "version")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("npx -y @orchestra-mcp/orchestra version: %v\n%s", err, stderrOf(err))
	}
	if got, want := string(out), "orchestra "+r.version+"\n"; got != want {
		t.Errorf("npx -y @orchestra-mcp/orchestra version printed %q, want %q", got, want)
	}
}

// TestQuickStartOverTypeScriptSDK: the TypeScript SDK's client starts
// orchestra as a client's configuration does, with npx -y over stdio, and
// runs the quick start.
func TestQuickStartOverTypeScriptSDK(t *testing.T) {
	r := snapshot(t)
	dir := install(t, r.launcher, r.platform)
	clients, err := filepath.Abs("../../testdata/clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(clients, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Fatalf("the TypeScript SDK is not installed: run npm ci in testdata/clients: %v", err)
	}
	quickstart, err := filepath.Abs("../../examples/quickstart.json")
	if err != nil {
		t.Fatal(err)
	}
	command, _ := json.Marshal([]string{"npx", "-y", "@orchestra-mcp/orchestra", "serve", "--store", "memory"})
	cmd := exec.Command("node", filepath.Join(clients, "client.mjs"), "v1", "stdio", string(command), "2025-11-25", "request:"+quickstart)
	cmd.Dir = dir // where npx finds the installed package
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s%s", err, out, stderrOf(err))
	}
	var res struct {
		OK         bool            `json:"ok"`
		Error      string          `json:"error"`
		Structured json.RawMessage `json:"structured"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("client.mjs printed %q: %v", out, err)
	}
	if !res.OK {
		t.Fatalf("the quick start over the launcher: %s\n%s", res.Error, res.Structured)
	}
	if !strings.Contains(string(res.Structured), `Revenue for the sales team: 236.5`) {
		t.Errorf("the quick start's report is missing from its envelope:\n%s", res.Structured)
	}
	// The client closed its session (stdin, then SIGTERM to npx) and
	// waited for npx to exit: nothing it started runs on.
	if left := processesOf(t, filepath.Join(dir, "node_modules", "@orchestra-mcp", "orchestra-"+r.target, "bin", "orchestra")); len(left) > 0 {
		t.Errorf("orchestra processes %v outlived the client", left)
	}
}

// TestExitCodes: the launcher passes standard input, output and error
// through and exits with the binary's code.
func TestExitCodes(t *testing.T) {
	r := snapshot(t)
	dir := install(t, r.launcher, r.platform)
	launcher := filepath.Join(dir, "node_modules", ".bin", "orchestra")
	binary := filepath.Join(dir, "node_modules", "@orchestra-mcp", "orchestra-"+r.target, "bin", "orchestra")
	quickstart, err := os.ReadFile("../../examples/quickstart.json")
	if err != nil {
		t.Fatal(err)
	}
	failing := `{"plan": {"steps": [{"id": "a", "tool": "json_query", "arguments": {"query": "error(\"boom\")", "input": 1}}]}}`
	for _, c := range []struct {
		name, stdin, stdout string
		args                []string
		code                int
	}{
		{name: "version", args: []string{"version"}, stdout: "orchestra " + r.version},
		{name: "a plan on stdin that succeeds", args: []string{"run", "--store", "memory", "-"}, stdin: string(quickstart), stdout: "Revenue for the sales team: 236.5"},
		{name: "a plan that fails", args: []string{"run", "--store", "memory", "-"}, stdin: failing, stdout: `"status": "failed"`, code: 1},
		{name: "a missing plan file", args: []string{"run", "--store", "memory", "missing.json"}, code: 2},
		{name: "an unknown command", args: []string{"no-such-command"}, code: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, bin := range []string{binary, launcher} {
				cmd := exec.Command(bin, c.args...)
				cmd.Dir = dir
				cmd.Stdin = strings.NewReader(c.stdin)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				var exit *exec.ExitError
				if err != nil && !errors.As(err, &exit) {
					t.Fatal(err)
				}
				if code := cmd.ProcessState.ExitCode(); code != c.code {
					t.Errorf("%s %s exited %d, want %d\nstderr: %s", filepath.Base(bin), strings.Join(c.args, " "), code, c.code, stderr.String())
				}
				if !strings.Contains(stdout.String(), c.stdout) {
					t.Errorf("%s %s printed no %q:\n%s", filepath.Base(bin), strings.Join(c.args, " "), c.stdout, stdout.String())
				}
				if c.code == 2 && stderr.Len() == 0 {
					t.Errorf("%s %s wrote no error", filepath.Base(bin), strings.Join(c.args, " "))
				}
			}
		})
	}
}

// TestSignals: SIGTERM and SIGINT reach orchestra through the launcher,
// which drains: the running plan is answered as cancelled before it exits,
// and the launcher exits only after it, with no process of its tree left.
// SIGHUP, which orchestra does not catch, kills it, and the launcher dies
// of the same signal; so does it when orchestra is killed.
func TestSignals(t *testing.T) {
	r := snapshot(t)
	dir := install(t, r.launcher, r.platform)
	launcher := filepath.Join(dir, "node_modules", ".bin", "orchestra")
	fixture := filepath.Join(t.TempDir(), "fixtureserver")
	if out, err := exec.Command("go", "build", "-o", fixture, "../../testdata/fixtureserver").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture server: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "server:\n  shutdown_grace: 100ms\nmcpServers:\n  fx:\n    command: %q\n", fixture), 0o644); err != nil {
		t.Fatal(err)
	}

	for name, sig := range map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT} {
		t.Run(name+" drains", func(t *testing.T) {
			s := startServe(t, launcher, cfg)
			s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"plan":{"steps":[{"id":"w","tool":"fx__sleep","arguments":{"ms":60000}}]}},"_meta":{"progressToken":"p"}}}`)
			var tree []int
			answer := s.read(t, func(m message) bool {
				if tree == nil && m.Method == "notifications/progress" && strings.Contains(string(m.Params), "started") {
					// The plan's step runs in the fixture server, a
					// child of orchestra, a child of the launcher.
					tree = descendants(t, s.cmd.Process.Pid)
					if len(tree) < 2 {
						t.Errorf("the launcher's process tree is %v: want orchestra and its fixture server", tree)
					}
					if err := s.cmd.Process.Signal(sig); err != nil {
						t.Fatal(err)
					}
				}
				return string(m.ID) == "2"
			})
			if tree == nil {
				t.Fatal("the plan's step never started")
			}
			state := s.wait(t)
			if !strings.Contains(string(answer.Result), `"isError":true`) || !strings.Contains(string(answer.Result), "cancelled") {
				t.Errorf("want the running plan answered as cancelled, got %s", answer.Result)
			}
			if state.ExitCode() != 0 {
				t.Errorf("the launcher ended with %v, want exit 0 (orchestra's after a drain)", state)
			}
			for _, pid := range tree {
				if running(pid) {
					t.Errorf("process %d of the launcher's tree %v outlived it", pid, tree)
				}
			}
		})
	}

	signalled := func(t *testing.T, state *os.ProcessState, want syscall.Signal) {
		t.Helper()
		ws := state.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != want {
			t.Errorf("the launcher ended with %v, want killed by %v", state, want)
		}
	}
	t.Run("SIGHUP kills orchestra and the launcher", func(t *testing.T) {
		s := startServe(t, launcher, cfg)
		tree := descendants(t, s.cmd.Process.Pid)
		if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		signalled(t, s.wait(t), syscall.SIGHUP)
		for _, pid := range tree {
			if running(pid) {
				t.Errorf("process %d of the launcher's tree %v outlived it", pid, tree)
			}
		}
	})
	t.Run("orchestra killed", func(t *testing.T) {
		s := startServe(t, launcher, cfg)
		orchestra := children(t, s.cmd.Process.Pid)
		if len(orchestra) != 1 {
			t.Fatalf("the launcher has children %v, want orchestra alone", orchestra)
		}
		if err := syscall.Kill(orchestra[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		signalled(t, s.wait(t), syscall.SIGKILL)
	})
}

// TestMissingPlatformPackage: without its platform's package the launcher
// says in one line which platform it is and what to install.
func TestMissingPlatformPackage(t *testing.T) {
	r := snapshot(t)
	dir := install(t, r.launcher)
	cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "orchestra"), "version")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the launcher without its platform package: %v, want exit 1\n%s", err, stderr.String())
	}
	msg := stderr.String()
	install := "npm install @orchestra-mcp/orchestra-" + r.target + "@" + r.npmVersion
	if strings.Count(msg, "\n") != 1 || !strings.HasSuffix(msg, "\n") || !strings.Contains(msg, " "+r.target) || !strings.Contains(msg, install) {
		t.Errorf("want one line naming %s and %q, got:\n%s", r.target, install, msg)
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout: %q, want nothing", stdout.String())
	}
}

// serve is orchestra serve on stdio, started through the launcher.
type serve struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// message is a JSON-RPC message from the server.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// startServe starts the launcher with serve and initializes a session.
func startServe(t *testing.T, launcher, cfg string) *serve {
	t.Helper()
	cmd := exec.Command(launcher, "serve", "--config", cfg, "--store", "memory")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a failed test left: the launcher's tree, then the
		// launcher.
		for _, pid := range descendants(t, cmd.Process.Pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("stderr of the launcher and orchestra:\n%s", stderr.String())
		}
	})
	s := &serve{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	s.lines.Buffer(make([]byte, 1<<20), 16<<20)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"launcher-test","version":"1"}}}`)
	s.read(t, func(m message) bool { return string(m.ID) == "1" })
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *serve) send(line string) {
	fmt.Fprintln(s.stdin, line)
}

// read reads messages until done returns true for one, and returns it.
func (s *serve) read(t *testing.T, done func(message) bool) message {
	t.Helper()
	for s.lines.Scan() {
		var m message
		if err := json.Unmarshal(s.lines.Bytes(), &m); err != nil {
			t.Fatalf("stdout: %q is not JSON-RPC: %v", s.lines.Text(), err)
		}
		if done(m) {
			return m
		}
	}
	t.Fatalf("stdout ended (%v) before the message the test waits for", s.lines.Err())
	return message{}
}

// wait waits for the launcher to exit, for up to a minute.
func (s *serve) wait(t *testing.T) *os.ProcessState {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return s.cmd.ProcessState
	case <-time.After(time.Minute):
		t.Fatal("the launcher did not exit within a minute")
		return nil
	}
}

// children lists the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := stat(p); ok && ppid == pid {
			kids = append(kids, p)
		}
	}
	return kids
}

// descendants lists the processes under pid: its children, theirs, and so
// on.
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	var all []int
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		kids := children(t, queue[0])
		all = append(all, kids...)
		queue = append(queue, kids...)
	}
	return all
}

// processesOf lists the running processes of the executable file binary.
func processesOf(t *testing.T, binary string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == binary && running(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stat reads the parent and state of process pid from /proc.
func stat(pid int) (ppid int, state byte, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, fields[0][0], err == nil
}

// running reports whether process pid exists and has not exited (a
// zombie has).
func running(pid int) bool {
	_, state, ok := stat(pid)
	return ok && state != 'Z'
}

// stderrOf returns the standard error an exec.Cmd.Output error carries.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
