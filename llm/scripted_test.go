package llm_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"

	"github.com/orchestra-mcp/orchestra/llm"
)

func TestScriptedInMemory(t *testing.T) {
	s := llm.NewScripted([]llm.Response{
		{Text: "first"},
		{ToolCalls: []llm.ToolCall{{Name: "__planning__", Arguments: json.RawMessage(`{"type":"direct_response"}`)}}, Usage: llm.Usage{InputTokens: 5, OutputTokens: 1}},
	})
	req := &llm.Request{System: "sys", Messages: []llm.Message{{Role: "user", Content: "one"}}}
	r1, err := s.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Messages[0].Content = "changed after the call"
	r2, err := s.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: "user", Content: "two"}}, Tools: []llm.ToolDef{planningTool}, ToolChoice: "required"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Text != "first" || r1.StopReason != llm.StopEndTurn || r1.Model != "scripted" {
		t.Errorf("first response = %+v", r1)
	}
	want := []llm.ToolCall{{ID: "call_2_1", Name: "__planning__", Arguments: json.RawMessage(`{"type":"direct_response"}`)}}
	if diff := cmp.Diff(want, r2.ToolCalls); diff != "" || r2.StopReason != llm.StopToolUse {
		t.Errorf("second response (-want +got):\n%s%s", diff, r2.StopReason)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Messages[0].Content != "one" || reqs[0].System != "sys" || reqs[1].ToolChoice != "required" {
		t.Errorf("recorded requests = %+v", reqs)
	}
	_, err = s.Generate(t.Context(), req)
	if !errors.Is(err, llm.ErrScriptExhausted) || !strings.Contains(err.Error(), "response 3") {
		t.Errorf("third call: %v", err)
	}
	if s.Remaining() != 0 || len(s.Requests()) != 3 {
		t.Errorf("remaining %d, requests %d", s.Remaining(), len(s.Requests()))
	}
}

func TestScriptedFiles(t *testing.T) {
	dir := t.TempDir()
	jsonl := `{"text": "hello"}

{"tool_calls": [{"id": "c1", "name": "search", "arguments": {"q": "go"}}], "usage": {"input_tokens": 3, "output_tokens": 4}}
{"error": {"kind": "rate_limited", "message": "try later"}}
`
	array := `[{"text": "hello"}, {"tool_calls": [{"id": "c1", "name": "search", "arguments": {"q": "go"}}], "usage": {"input_tokens": 3, "output_tokens": 4}}, {"error": {"kind": "rate_limited", "message": "try later"}}]`
	for name, content := range map[string]string{"script.jsonl": jsonl, "script.json": array} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			m, err := llm.New(llm.Config{Provider: "scripted", Script: path}, llm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Name() != "scripted:"+name {
				t.Errorf("Name = %q", m.Name())
			}
			req := &llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}}
			r, err := m.Generate(t.Context(), req)
			if err != nil || r.Text != "hello" {
				t.Fatalf("1: %+v, %v", r, err)
			}
			r, err = m.Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := &llm.Response{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{"q": "go"}`)}},
				Usage: llm.Usage{InputTokens: 3, OutputTokens: 4}, Model: "scripted", StopReason: llm.StopToolUse}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("2 (-want +got):\n%s", diff)
			}
			_, err = m.Generate(t.Context(), req)
			if !errors.Is(err, llm.ErrRateLimited) || !strings.Contains(err.Error(), "try later") {
				t.Errorf("3: %v", err)
			}
			_, err = m.Generate(t.Context(), req)
			if !errors.Is(err, llm.ErrScriptExhausted) {
				t.Errorf("4: %v", err)
			}
		})
	}
}

func TestScriptErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"unknown field": `{"txt": "typo"}`,
		"unknown kind":  `{"error": {"kind": "meltdown"}}`,
		"no tool name":  `[{"tool_calls": [{"arguments": {}}]}]`,
		"not json":      `hello`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := llm.LoadScript(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error = %v, want one naming the file", name, err)
		}
	}
	if _, err := llm.LoadScript(filepath.Join(dir, "missing.jsonl")); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := llm.New(llm.Config{Provider: "scripted"}, llm.Options{}); err == nil || !strings.Contains(err.Error(), "planner.script") {
		t.Errorf("no script: %v", err)
	}
}

func TestScriptedCancelled(t *testing.T) {
	s := llm.NewScripted([]llm.Response{{Text: "x"}})
	ctx, cancel := contextWithCancel(t)
	cancel()
	if _, err := s.Generate(ctx, &llm.Request{}); err == nil {
		t.Fatal("no error for a cancelled context")
	}
	if s.Remaining() != 1 {
		t.Error("a cancelled call used a response")
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  llm.Config
		want string
	}{
		{llm.Config{}, "set planner.provider"},
		{llm.Config{Provider: "gemini"}, `unknown planner provider "gemini"`},
		{llm.Config{Provider: "sampling"}, "client session"},
	} {
		if _, err := llm.New(tt.cfg, llm.Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
		}
	}
}

func TestConfigDecoding(t *testing.T) {
	const js = `{"provider":"openai","model":"llama3","base_url":"http://localhost:11434/v1","api_key_env":"K",
		"max_tokens":100,"temperature":0,"timeout":"1m30s","max_retries":1,"headers":{"X-A":"b"}}`
	var c llm.Config
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	want := llm.Config{Provider: "openai", Model: "llama3", BaseURL: "http://localhost:11434/v1", APIKeyEnv: "K",
		MaxTokens: 100, Temperature: new(0.0), Timeout: llm.Duration(90 * time.Second), MaxRetries: 1, Headers: map[string]string{"X-A": "b"}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	const ym = "provider: openai\nmodel: llama3\nbase_url: http://localhost:11434/v1\napi_key_env: K\nmax_tokens: 100\ntemperature: 0\ntimeout: 90000\nmax_retries: 1\nheaders:\n  X-A: b\n"
	var y llm.Config
	if err := yaml.Unmarshal([]byte(ym), &y); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, y); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	b, _ := json.Marshal(llm.Config{Timeout: llm.Duration(2 * time.Second)})
	if !strings.Contains(string(b), `"timeout":"2s"`) {
		t.Errorf("marshalled %s", b)
	}
	var d llm.Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("invalid duration accepted")
	}
	if err := json.Unmarshal([]byte(`2500`), &d); err != nil || d.D() != 2500*time.Millisecond {
		t.Errorf("2500 (milliseconds) = %v, %v", d, err)
	}
}

// An entry with "after" answers the turn whose conversation ends with that
// call's result, whatever its place, and is never taken in order: a fresh
// model (another process, resuming a loop) answers the resumed turn right.
func TestScriptedAfter(t *testing.T) {
	script := `{"tool_calls": [{"id": "e1", "name": "edit"}]}
{"after": "e1", "text": "edited"}
{"text": "next"}
`
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := llm.LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	first, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}})
	if err != nil || len(first.ToolCalls) != 1 {
		t.Fatalf("first: %+v, %v", first, err)
	}
	// In order, the "after" entry is skipped.
	next, err := m.Generate(t.Context(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "other"}}})
	if err != nil || next.Text != "next" {
		t.Fatalf("in order: %+v, %v", next, err)
	}
	resumed, _ := llm.LoadScript(path)
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "go"}, {Role: llm.RoleAssistant, ToolCalls: first.ToolCalls}, {Role: llm.RoleTool, ToolCallID: "e1", Content: "{}"}}
	got, err := resumed.Generate(t.Context(), &llm.Request{Messages: msgs})
	if err != nil || got.Text != "edited" {
		t.Fatalf("the turn after e1: %+v, %v", got, err)
	}
	if _, err := resumed.Generate(t.Context(), &llm.Request{Messages: msgs}); err != nil {
		t.Fatalf("the entries in order after it: %v", err)
	}
}
