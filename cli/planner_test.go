package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

// builtinPlan uses the built-in tools, so it runs with the default catalog.
const builtinPlan = `{"type":"tool_calls","reasoning":"count, then render","calls":[
	{"tool_name":"json_query","arguments":{"query":".items | length","input":{"items":[1,2,3]}}},
	{"tool_name":"render","arguments":{"template":"count={{.n}}","values":{"n":"$0.output.result"}}}]}`

// scriptConfig writes a configuration whose planner answers with the
// given responses (scripted provider), and returns its path.
func scriptConfig(t *testing.T, responses ...string) string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(script, []byte(strings.Join(responses, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte("planner:\n  provider: scripted\n  script: "+script+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func planningLine(plan string) string {
	return `{"tool_calls":[{"name":"__planning__","arguments":` + strings.Join(strings.Fields(plan), " ") + `}],"usage":{"input_tokens":100,"output_tokens":10}}`
}

func textLine(text string) string {
	b, _ := json.Marshal(map[string]any{"text": text, "usage": map[string]any{"input_tokens": 50, "output_tokens": 5}})
	return string(b)
}

func runPlannerCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(t.Context(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCLIPlanner(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	tests := []struct {
		name       string
		args       func(t *testing.T) []string
		stdin      string
		code       int
		stdout     []string
		stderr     []string
		notStdout  []string
		jsonCalls  int // model calls in the printed envelope, when > 0
		jsonStatus string
	}{{
		name: "plan prints the validated plan",
		args: func(t *testing.T) []string {
			return []string{"plan", "--config", scriptConfig(t, planningLine(builtinPlan)), "count the items, then say how many"}
		},
		stdout: []string{`"tool": "json_query"`, `"n": "$0.output.result"`, `"reasoning": "count, then render"`},
		stderr: []string{"planner: 1 model call (scripted:script.jsonl), 100 input and 10 output tokens"},
	}, {
		name: "plan reads the goal from stdin",
		args: func(t *testing.T) []string {
			return []string{"plan", "--config", scriptConfig(t, planningLine(`{"type":"direct_response","content":"Hi."}`)), "-"}
		},
		stdin:  "say hi",
		stdout: []string{`"type": "direct_response"`, `"content": "Hi."`},
	}, {
		name: "plan that stays invalid fails with the errors and the last answer",
		args: func(t *testing.T) []string {
			bad := planningLine(`{"type":"tool_calls","calls":[{"tool_name":"nope","arguments":{}}]}`)
			return []string{"plan", "--config", scriptConfig(t, bad, bad), "do it"}
		},
		code:   ExitFailed,
		stderr: []string{"the planner gave up after 2 attempts", "[unknown_tool]", "the model's last answer:", `"nope"`},
	}, {
		name: "ask prints the answer",
		args: func(t *testing.T) []string {
			return []string{"ask", "--config", scriptConfig(t, planningLine(builtinPlan), textLine("There are 3 items.")), "how many items?"}
		},
		stdout:    []string{"There are 3 items.\n"},
		notStdout: []string{"artifact_id"},
		stderr:    []string{"Plan success: 2 of 2 tool steps succeeded", "planner: 2 model calls"},
	}, {
		name: "ask --json prints the envelope",
		args: func(t *testing.T) []string {
			return []string{"ask", "--json", "--config", scriptConfig(t, planningLine(builtinPlan), textLine("There are 3 items.")), "how many items?"}
		},
		jsonCalls:  2,
		jsonStatus: "success",
		stdout:     []string{`"response": "There are 3 items."`, `"text": "count=3"`},
	}, {
		name: "ask with a direct response makes one model call",
		args: func(t *testing.T) []string {
			return []string{"ask", "--json", "--config", scriptConfig(t, planningLine(`{"type":"direct_response","content":"Hello!"}`)), "hi"}
		},
		jsonCalls:  1,
		jsonStatus: "success",
	}, {
		name:   "plan without a planner",
		args:   func(t *testing.T) []string { return []string{"plan", "goal"} },
		code:   ExitInvalid,
		stderr: []string{"orchestra plan: no planner model is configured", "hint: add a planner block", "provider: openai"},
	}, {
		name:   "ask without a goal",
		args:   func(t *testing.T) []string { return []string{"ask"} },
		code:   ExitInvalid,
		stderr: []string{"orchestra ask: missing goal", "usage: orchestra ask"},
	}, {
		name: "ask with the sampling provider has no client to sample",
		args: func(t *testing.T) []string {
			cfg := filepath.Join(t.TempDir(), "c.yaml")
			os.WriteFile(cfg, []byte("planner:\n  provider: sampling\n"), 0o644)
			return []string{"ask", "--config", cfg, "goal"}
		},
		code:   ExitInvalid,
		stderr: []string{"no planner model is configured", "there is no client here"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runPlannerCLI(t, tt.stdin, tt.args(t)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout)
				}
			}
			for _, not := range tt.notStdout {
				if strings.Contains(stdout, not) {
					t.Errorf("stdout has %q:\n%s", not, stdout)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tt.jsonCalls > 0 {
				var env struct {
					Artifact struct {
						Status  string `json:"status"`
						Planner struct {
							ModelCalls int `json:"model_calls"`
						} `json:"planner"`
					} `json:"artifact"`
				}
				if err := json.Unmarshal([]byte(stdout), &env); err != nil {
					t.Fatalf("stdout is not an envelope: %v\n%s", err, stdout)
				}
				if env.Artifact.Planner.ModelCalls != tt.jsonCalls || env.Artifact.Status != tt.jsonStatus {
					t.Errorf("model_calls %d, status %s; want %d, %s", env.Artifact.Planner.ModelCalls, env.Artifact.Status, tt.jsonCalls, tt.jsonStatus)
				}
			}
		})
	}
}

// orchestra ask against a local fake of the OpenAI Chat Completions API,
// configured the way a user points it at Ollama or vLLM.
func TestCLIAskOpenAICompatible(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []map[string]any
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(b, &body)
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer local-key" {
			t.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		message := `{"role":"assistant","content":"There are 3 items."}`
		if n == 1 {
			args, _ := json.Marshal(builtinPlan)
			message = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"__planning__","arguments":%s}}]}`, args)
		}
		fakeopenai.Respond(w, body["stream"] == true, fmt.Appendf(nil, `{"id":"c","object":"chat.completion","created":1,"model":"llama3","choices":[{"index":0,"finish_reason":"stop","message":%s}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`, message))
	}))
	defer srv.Close()
	t.Setenv("ORCHESTRA_TEST_KEY", "local-key")
	cfg := filepath.Join(t.TempDir(), "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("planner:\n  provider: openai\n  model: llama3\n  base_url: %s/v1\n  api_key_env: ORCHESTRA_TEST_KEY\n", srv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The run is shown as plain lines on stderr (stderr is no terminal);
	// stdout stays the answer alone.
	code, stdout, stderr := runPlannerCLI(t, "", "ask", "--config", cfg, "--progress", "always", "how many items?")
	if code != ExitOK || stdout != "There are 3 items.\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"] planning: how many items?", "] planned 2 tool steps with openai:llama3 (1 model call) in ", "] 0 (json_query) success in ", "] plan success in "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("--progress always: stderr has no %q:\n%s", want, stderr)
		}
	}
	if len(bodies) != 2 || !strings.Contains(stderr, "planner: 2 model calls (openai:llama3), 20 input and 4 output tokens") {
		t.Errorf("%d requests; stderr:\n%s", len(bodies), stderr)
	}
	// The built-in tools' free-form arguments keep the planning tool
	// non-strict; the model name and the forced tool choice are sent.
	if bodies[0]["model"] != "llama3" || fmt.Sprint(bodies[0]["tool_choice"]) != "map[function:map[name:__planning__] type:function]" {
		t.Errorf("first request: model %v, tool_choice %v", bodies[0]["model"], bodies[0]["tool_choice"])
	}
}

var _ = context.Background
