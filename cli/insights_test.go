package cli

import (
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

// openAIFake is a local OpenAI-compatible server: planning requests (those
// offering __planning__) are answered with plan(), others with text. It
// keeps every request's messages.
type openAIFake struct {
	*httptest.Server
	mu       sync.Mutex
	messages []string // the messages of each request, joined
	plan     func() string
}

func newOpenAIFake(t *testing.T, plan func() string, text string) *openAIFake {
	t.Helper()
	f := &openAIFake{plan: plan}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content any `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
			Stream bool `json:"stream"`
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("request body: %v", err)
		}
		var msgs []string
		for _, m := range body.Messages {
			msgs = append(msgs, fmt.Sprint(m.Content))
		}
		f.mu.Lock()
		f.messages = append(f.messages, strings.Join(msgs, "\n"))
		f.mu.Unlock()
		if len(body.Tools) > 0 && body.Tools[0].Function.Name == "__planning__" {
			args, _ := json.Marshal(f.plan())
			fakeopenai.Respond(w, body.Stream, fmt.Appendf(nil, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"tool_calls",
				"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"__planning__","arguments":%s}}]}}],
				"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`, args))
			return
		}
		answer, _ := json.Marshal(text)
		fakeopenai.Respond(w, body.Stream, fmt.Appendf(nil, `{"id":"c2","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"finish_reason":"stop",
			"message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":50,"completion_tokens":5,"total_tokens":55}}`, answer))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *openAIFake) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.messages...)
}

// TestInsightsFromAFailedRunReachTheNextPrompt runs orchestra ask twice on
// one store, as two separate runs of the command: the first run's plan
// fails with a tool error, which leaves an insight in the store; the second
// planning request carries it to the model. orchestra insights lists it,
// and the record of a run of ask has the answer and the RESPOND call.
func TestInsightsFromAFailedRunReachTheNextPrompt(t *testing.T) {
	t.Setenv("ORCHESTRA_CONFIG", "")
	const failing = `{"type":"tool_calls","reasoning":"query","calls":[
		{"tool_name":"json_query","arguments":{"query":"error(\"the input has no field named total\")","input":{"items":[1]}}}]}`
	const working = `{"type":"tool_calls","reasoning":"query","calls":[
		{"tool_name":"json_query","arguments":{"query":".items | length","input":{"items":[1]}}}]}`
	plans := []string{failing, working}
	var mu sync.Mutex
	api := newOpenAIFake(t, func() string {
		mu.Lock()
		defer mu.Unlock()
		p := plans[0]
		plans = plans[1:]
		return p
	}, "There is one item.")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte("planner:\n  provider: openai\n  model: gpt-test\n  base_url: "+api.URL+"/v1\n  max_retries: -1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "records.db")

	code, _, stderr := runPlannerCLI(t, "", "ask", "--config", cfg, "--store", db, "count the items")
	if code != 1 {
		t.Fatalf("the first ask exited %d, want 1 (its plan fails):\n%s", code, stderr)
	}
	code, stdout, stderr := runPlannerCLI(t, "", "insights", "--store", db)
	if code != 0 || !strings.Contains(stdout, "json_query") || !strings.Contains(stdout, "the input has no field named total") {
		t.Fatalf("orchestra insights exited %d:\n%s\n%s", code, stdout, stderr)
	}

	code, stdout, stderr = runPlannerCLI(t, "", "ask", "--config", cfg, "--store", db, "--json", "count the items again")
	if code != 0 {
		t.Fatalf("the second ask exited %d:\n%s", code, stderr)
	}
	reqs := api.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4 (plan and answer, twice)", len(reqs))
	}
	if strings.Contains(reqs[0], "Lessons from earlier runs") {
		t.Error("the first planning request shows lessons")
	}
	if !strings.Contains(reqs[2], "Lessons from earlier runs") || !strings.Contains(reqs[2], "- json_query: failed with") ||
		!strings.Contains(reqs[2], "the input has no field named total") {
		t.Errorf("the second planning request does not carry the insight:\n%s", reqs[2])
	}

	// ask keeps its record, with what the planner added after the run.
	var env struct {
		ArtifactID string `json:"artifact_id"`
	}
	if err := json.Unmarshal([]byte(stdout), &env); err != nil || env.ArtifactID == "" {
		t.Fatalf("ask --json printed no envelope: %v\n%s", err, stdout)
	}
	code, stdout, stderr = runPlannerCLI(t, "", "executions", "--store", db, "--json", env.ArtifactID)
	if code != 0 {
		t.Fatalf("executions exited %d: %s", code, stderr)
	}
	var rec struct {
		Envelope struct {
			Artifact struct {
				Response string `json:"response"`
				Planner  struct {
					ModelCalls int `json:"model_calls"`
				} `json:"planner"`
			} `json:"artifact"`
		} `json:"envelope"`
	}
	if err := json.Unmarshal([]byte(stdout), &rec); err != nil {
		t.Fatal(err)
	}
	if a := rec.Envelope.Artifact; a.Response != "There is one item." || a.Planner.ModelCalls != 2 {
		t.Errorf("the record's envelope has response %q and %d model calls; want the answer and 2", a.Response, a.Planner.ModelCalls)
	}

	code, _, stderr = runPlannerCLI(t, "", "insights", "--store", db, "clear")
	if code != 0 || !strings.Contains(stderr, "cleared 1 insights") {
		t.Errorf("insights clear exited %d: %s", code, stderr)
	}
}
