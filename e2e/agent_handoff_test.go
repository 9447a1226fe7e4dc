package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/cli"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// TestTSClientAgentHandoff: the TypeScript SDK client calls a plan whose
// agent step (its model a local fake that counts requests) reads a file
// with server-filesystem from npm and asks for the client tool
// editor_apply: the run pauses with that call, the client resumes with a
// result, the model's next request carries it as a tool message, and the
// plan's next step uses the agent's answer (testdata/clients/
// agent_handoff.mjs). "kill" kills orchestra with SIGKILL between the
// pause and the resume and resumes through a new process. Either way the
// fake saw each turn once and the filesystem server one read.
func TestTSClientAgentHandoff(t *testing.T) {
	node, err := exec.LookPath("node")
	clients, _ := filepath.Abs(filepath.Join("testdata", "clients"))
	fs, _ := filepath.Abs(filepath.Join("testdata", "npm", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"))
	_, cerr := os.Stat(filepath.Join(clients, "node_modules", "@modelcontextprotocol", "sdk"))
	_, ferr := os.Stat(fs)
	if err != nil || cerr != nil || ferr != nil {
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal("the TypeScript clients or the npm servers are not installed: run `npm ci` in testdata/clients and testdata/npm")
		}
		t.Skip("the TypeScript clients or the npm servers are not installed")
	}
	for _, mode := range []string{"same", "kill"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			dir, _ = filepath.EvalSymlinks(dir)
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha"), 0o644); err != nil {
				t.Fatal(err)
			}
			fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
				if len(r.ToolResults()) == 0 {
					read := fakeopenai.Call("fs__read_text_file", `{"path": "`+filepath.Join(dir, "a.txt")+`"}`)
					apply := fakeopenai.Call("editor_apply", `{"path": "a.txt", "text": "ALPHA"}`)
					return fakeopenai.Reply{ToolCalls: append(read.ToolCalls, apply.ToolCalls...)}
				}
				return fakeopenai.Text("edited; the client said " + strings.Join(r.ToolResults(), " | "))
			})
			cfg := filepath.Join(dir, "orchestra.yaml")
			yaml := "planner:\n  provider: openai\n  model: fake-model\n  base_url: " + fake.URL() + "\n  max_retries: -1\n" +
				"mcpServers:\n  fs:\n    command: " + node + "\n    args: [" + fs + ", " + dir + "]\n" +
				"agents:\n  coder:\n    description: Edits files.\n    instructions: You are coder.\n    tools: [fs__read_text_file, editor_*]\n"
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, "orchestra.db")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			target, _ := json.Marshal([]string{orchestraBin, "serve", "--config", cfg, "--store", db})
			runTSClient(ctx, t, node, clients, "agent_handoff.mjs", string(target), mode, dir)
			reqs := fake.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the model was asked %d times; want 2 (each turn once)", len(reqs))
			}
			if res := reqs[1].ToolResults(); len(res) != 2 || !strings.Contains(res[0], "alpha") || res[1] != `{"applied":true}` {
				t.Errorf("the tool messages of the second turn: %q", res)
			}
			st, err := store.Open(t.Context(), db, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			runs, _, err := st.List(t.Context(), store.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			reads := 0
			if len(runs) != 2 {
				t.Errorf("%d runs recorded; want the plan's and its agent's", len(runs))
			}
			for _, run := range runs {
				if run.Status != store.StatusSuccess {
					t.Errorf("run %s (%s) is recorded %s; want success", run.ExecID, run.Tool, run.Status)
				}
				_, steps, err := st.Get(t.Context(), run.ExecID)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range steps {
					if s.Tool == "fs__read_text_file" {
						reads++
					}
				}
			}
			if reads != 1 {
				t.Errorf("the filesystem server was called %d times in the records; want 1", reads)
			}
		})
	}
}

// TestHandoffExample runs the README's offline handoff example as a user
// would: `orchestra run` pauses at the agent's editor_apply call, and
// `orchestra resume ID --results FILE`, another invocation, goes on with
// the agent's loop and finishes the plan.
func TestHandoffExample(t *testing.T) {
	db := filepath.Join(t.TempDir(), "o.db")
	cfg := "examples/agents/handoff/config.yaml"
	var out, errOut bytes.Buffer
	if code := cli.Run(context.Background(), []string{"run", "--config", cfg, "--store", db, "examples/agents/handoff/plan.json"}, strings.NewReader(""), &out, &errOut); code != cli.ExitOK {
		t.Fatalf("orchestra run exited %d: %s\n%s", code, errOut.String(), out.String())
	}
	var env struct {
		Artifact struct {
			Status  string           `json:"status"`
			Pending []map[string]any `json:"pending"`
			Resume  struct {
				ExecID string `json:"exec_id"`
			} `json:"resume"`
			Steps  []struct{ Output any } `json:"steps"`
			Errors []map[string]any       `json:"errors"`
		} `json:"artifact"`
	}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "awaiting_client" || len(env.Artifact.Pending) != 1 ||
		env.Artifact.Pending[0]["tool"] != "editor_apply" || env.Artifact.Pending[0]["agent"] != "agent__editor" {
		t.Fatalf("orchestra run: %s (%v)", out.String(), err)
	}
	if strings.Contains(errOut.String(), "FOREIGN KEY") {
		t.Errorf("the run logged a failed record write:\n%s", errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := cli.Run(context.Background(), []string{"resume", "--config", cfg, "--store", db, "--results", "examples/agents/handoff/results.json", env.Artifact.Resume.ExecID}, strings.NewReader(""), &out, &errOut); code != cli.ExitOK {
		t.Fatalf("orchestra resume exited %d: %s\n%s", code, errOut.String(), out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &env); err != nil || env.Artifact.Status != "success" || len(env.Artifact.Steps) != 2 ||
		fmt.Sprint(env.Artifact.Steps[1].Output) != "map[text:editor: Retitled notes.md to RELEASE NOTES.]" {
		t.Fatalf("orchestra resume: %s (%v)", out.String(), err)
	}
}
