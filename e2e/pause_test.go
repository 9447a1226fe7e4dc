package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/cli"
	"github.com/orchestra-mcp/orchestra/store"
)

// buildFixture builds the fixture server and writes a configuration that
// serves it as fx, with extra lines.
func buildFixture(t *testing.T, extra string) (dir, cfg string) {
	t.Helper()
	dir = t.TempDir()
	fixture := filepath.Join(dir, "fixtureserver")
	if out, err := exec.Command("go", "build", "-o", fixture, "./testdata/fixtureserver").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture server: %v\n%s", err, out)
	}
	cfg = filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("mcpServers:\n  fx:\n    command: %q\n%s", fixture, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// TestTSClientPauseAndResume drives pausing and resuming with the
// TypeScript SDK client (testdata/clients/pause.mjs), which validates every
// envelope against agent_orchestrate's output schema.
func TestTSClientPauseAndResume(t *testing.T) {
	node, clients := tsClients(t)
	dir, cfg := buildFixture(t, "")
	_, short := buildFixture(t, "limits:\n  pause_ttl: 1ms\n")
	for _, tc := range []struct{ mode, cfg string }{{"pause", cfg}, {"expire", short}, {"ask", cfg}, {"ask-none", cfg}} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			target, _ := json.Marshal([]string{orchestraBin, "serve", "--config", tc.cfg, "--store", filepath.Join(dir, tc.mode+".db")})
			runTSClient(ctx, t, node, clients, "pause.mjs", string(target), tc.mode)
		})
	}
}

// tsClients returns node and the directory of the TypeScript clients
// (testdata/clients), or skips the test when they are not installed
// (fails it with ORCHESTRA_REQUIRE_NPM).
func tsClients(t *testing.T) (node, clients string) {
	t.Helper()
	node, err := exec.LookPath("node")
	clients, _ = filepath.Abs(filepath.Join("testdata", "clients"))
	_, sdk := os.Stat(filepath.Join(clients, "node_modules", "@modelcontextprotocol", "sdk"))
	_, client := os.Stat(filepath.Join(clients, "node_modules", "@modelcontextprotocol", "client"))
	if err != nil || sdk != nil || client != nil {
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal("the TypeScript clients are not installed: run `npm ci` in testdata/clients")
		}
		t.Skip("the TypeScript clients are not installed: run `npm ci` in testdata/clients")
	}
	return node, clients
}

// runTSClient runs a script of the TypeScript clients with args and fails
// the test unless it prints {"ok": true, ...}; it logs the script's checks.
func runTSClient(ctx context.Context, t *testing.T, node, clients, script string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(clients, script)}, args...)...)
	cmd.Dir = clients
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var r struct {
		OK     bool     `json:"ok"`
		Checks []string `json:"checks"`
		Error  string   `json:"error"`
	}
	if err := json.Unmarshal(out, &r); err != nil || !r.OK {
		t.Fatalf("%s", out)
	}
	for _, c := range r.Checks {
		t.Log(c)
	}
}

// tallies reads the tally file of the fixture server: how often each name
// was counted.
func tallies(t *testing.T, file string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Fields(string(data)) {
		n[line]++
	}
	return n
}

// TestPausedRunSurvivesSIGKILL pauses a run at a client tool, kills
// orchestra with SIGKILL, starts it again on the same store and resumes:
// the run finishes, no server step ran twice (the fixture server counts
// them in a file), and the records show the pause and the resume.
func TestPausedRunSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir, cfg := buildFixture(t, "")
	db := filepath.Join(dir, "orchestra.db")
	tally := filepath.Join(dir, "tally")
	connect := func() (*mcp.ClientSession, *exec.Cmd) {
		cmd := exec.Command(orchestraBin, "serve", "--config", cfg, "--store", db)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "sigkill", Version: "1"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cs, cmd
	}
	call := func(cs *mcp.ClientSession, input string) map[string]any {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: json.RawMessage(input)})
		if err != nil {
			t.Fatal(err)
		}
		env, _ := res.StructuredContent.(map[string]any)
		return env
	}
	cs, cmd := connect()
	env := call(cs, `{"client_tools": [{"name": "edit", "output_schema": {"type": "object", "properties": {"diff": {"type": "string"}}}}],
		"plan": {"steps": [
			{"id": "read", "tool": "fx__tally", "arguments": {"file": "$bindings.tally", "name": "read"}},
			{"id": "edit", "tool": "edit", "arguments": {"count": "$read.output.count"}},
			{"id": "verify", "tool": "fx__tally", "arguments": {"file": "$bindings.tally", "name": "verify"}}
		]}, "bindings": {"tally": "`+tally+`"}}`)
	a := env["artifact"].(map[string]any)
	if a["status"] != "awaiting_client" {
		t.Fatalf("%v", env)
	}
	id := a["resume"].(map[string]any)["exec_id"].(string)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cs.Close()

	cs, _ = connect()
	defer cs.Close()
	env = call(cs, `{"resume": {"exec_id": "`+id+`", "results": {"edit": {"diff": "+1"}}}}`)
	a = env["artifact"].(map[string]any)
	if a["status"] != "success" {
		t.Fatalf("the resume after the restart: %v", env)
	}
	if got := tallies(t, tally); got["read"] != 1 || got["verify"] != 1 {
		t.Errorf("server steps ran %v; want read and verify once each", got)
	}
	cs.Close()

	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, _, err := st.Get(t.Context(), id)
	if err != nil || run.Status != store.StatusSuccess {
		t.Errorf("the record: %+v, %v", run, err)
	}
	hist, err := st.Pauses(t.Context(), id)
	if err != nil || len(hist) != 2 || hist[0].Event != "paused" || hist[1].Event != "resumed" {
		t.Errorf("the history of pauses: %+v, %v", hist, err)
	}
}

// TestResumeInterruptedRun kills `orchestra run` while the third of four
// steps runs (the first two succeeded), then `orchestra resume ID` runs
// only the last two: an HTTP server counts the calls of each step.
func TestResumeInterruptedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	var mu sync.Mutex
	hits := map[string]int{}
	block := make(chan struct{})
	defer close(block)
	started := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		first := hits[r.URL.Path] == 1
		mu.Unlock()
		if r.URL.Path == "/c" && first {
			close(started)
			select { // the first call of c never answers: the process is killed meanwhile
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	defer srv.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "orchestra.yaml")
	db := filepath.Join(dir, "orchestra.db")
	if err := os.WriteFile(cfg, []byte("builtins:\n  http_request:\n    allowed_hosts: [\"127.0.0.1\"]\n    allow_private_networks: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, s := range []string{"a", "b", "c", "d"} {
		steps = append(steps, `{"id": "`+s+`", "tool": "http_request", "arguments": {"url": "`+srv.URL+`/`+s+`"}}`)
	}
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, []byte(`{"plan": {"steps": [`+strings.Join(steps, ",")+`]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	killMidStep(t, cfg, db, planFile, started, "c")

	st, err := store.Open(t.Context(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runs, _, err := st.List(t.Context(), store.ListOptions{})
	st.Close()
	if err != nil || len(runs) != 1 || runs[0].Status != store.StatusInterrupted || !runs[0].Resumable {
		t.Fatalf("after the kill: %+v, %v; want one interrupted run that can be resumed", runs, err)
	}
	id := runs[0].ExecID

	var list bytes.Buffer
	if code := cli.Run(context.Background(), []string{"executions", "--store", db}, strings.NewReader(""), &list, &bytes.Buffer{}); code != cli.ExitOK || !strings.Contains(list.String(), "interrupted (resumable)") {
		t.Errorf("orchestra executions does not say the run can be resumed:\n%s", list.String())
	}

	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), []string{"resume", "--config", cfg, "--store", db, "--progress", "always", id}, strings.NewReader(""), &out, &errOut); code != cli.ExitOK {
		t.Fatalf("orchestra resume exited %d: %s\n%s", code, errOut.String(), out.String())
	}
	// --progress always shows the resumed run as plain lines: the steps
	// it runs, not those done before.
	for _, want := range []string{"] plan resumed\n", "] c (http_request) success in ", "] d (http_request) success in ", "] plan success in "} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("orchestra resume --progress always: stderr has no %q:\n%s", want, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "] a (http_request)") {
		t.Errorf("orchestra resume --progress always shows a step done before:\n%s", errOut.String())
	}
	var env struct {
		Artifact struct {
			Status string `json:"status"`
		} `json:"artifact"`
		Metadata struct {
			ExecID string `json:"exec_id"`
		} `json:"_metadata"`
	}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "success" || env.Metadata.ExecID != id {
		t.Fatalf("orchestra resume: %s (%v)", out.String(), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"/a": 1, "/b": 1, "/c": 2, "/d": 1}; fmt.Sprint(hits) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v: the resume runs only c and d", hits, want)
	}
}
