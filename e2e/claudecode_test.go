package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestClaudeCodeCallsAgentOrchestrate drives the real Claude Code (2.1.197,
// what npm installs on Node 20; testdata/claudecode) with `claude -p`
// against a local fake of the Anthropic Messages API, with `orchestra
// serve` as its MCP server over stdio. Claude Code 2.1.197 skips a tool
// whose input schema has a top-level oneOf (logging it only in its debug
// log), so the model would be told agent_orchestrate does not exist. The
// fake checks that the tools of the model request include it, asks for a
// call of it with a plan, and reads the result Claude Code sends back.
// Without the package it skips, or fails when ORCHESTRA_REQUIRE_NPM is set,
// as in CI.
func TestClaudeCodeCallsAgentOrchestrate(t *testing.T) {
	claude, err := filepath.Abs(filepath.Join("testdata", "claudecode", "node_modules", ".bin", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(claude); err != nil {
		msg := "Claude Code is not installed: run `npm ci` in testdata/claudecode"
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	api := &fakeMessages{t: t}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	mcpConfig := filepath.Join(dir, "mcp.json")
	data, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"orchestra": map[string]any{"command": orchestraBin, "args": []string{"serve", "--store", "memory", "--log-level", "warn"}},
	}})
	if err := os.WriteFile(mcpConfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), claude, "-p", "Add up 2 and 3 with orchestra.",
		"--mcp-config", mcpConfig, "--strict-mcp-config", "--allowedTools", agentOrchestrateInClaude,
		"--debug-file", filepath.Join(dir, "debug.log"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HOME="+dir, // Claude Code keeps its settings and sessions under HOME
		"ANTHROPIC_BASE_URL="+srv.URL, "ANTHROPIC_API_KEY=sk-ant-test-only",
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		"MCP_CONNECTION_NONBLOCKING=0", // the first model request waits for the MCP servers
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		debug, _ := os.ReadFile(filepath.Join(dir, "debug.log"))
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s\ndebug log (MCP lines):\n%s", err, stdout.String(), stderr.String(), mcpLines(debug))
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	debug, _ := os.ReadFile(filepath.Join(dir, "debug.log"))
	if !slices.Contains(api.tools, "mcp__orchestra__json_query") {
		t.Fatalf("the model request holds none of orchestra's tools (%v): Claude Code did not connect to it\n%s", api.tools, mcpLines(debug))
	}
	if !slices.Contains(api.tools, agentOrchestrateInClaude) {
		t.Fatalf("Claude Code did not give its model agent_orchestrate; its tools: %v\n%s", api.tools, mcpLines(debug))
	}
	if !strings.Contains(api.result, "sum 5") {
		t.Errorf("the tool result Claude Code sent back does not hold the plan's answer: %q", api.result)
	}
	if !strings.Contains(stdout.String(), "The sum is 5.") {
		t.Errorf("claude -p printed %q, want the model's last answer", stdout.String())
	}
}

// agentOrchestrateInClaude is agent_orchestrate's name among Claude Code's
// tools.
const agentOrchestrateInClaude = "mcp__orchestra__agent_orchestrate"

// mcpLines returns the lines of Claude Code's debug log about MCP.
func mcpLines(debug []byte) string {
	var out []string
	for _, line := range strings.Split(string(debug), "\n") {
		if strings.Contains(line, "MCP") || strings.Contains(line, "orchestra") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// fakeMessages is the Anthropic Messages API as Claude Code uses it
// (streaming): to the request that offers agent_orchestrate it answers
// with a call of it; to the one that brings the call's result, with text.
type fakeMessages struct {
	t      *testing.T
	mu     sync.Mutex
	tools  []string // the tools of the request that offered agent_orchestrate, or else of the last one
	result string   // the text of the tool result Claude Code sent back
}

// claudePlan is the plan the fake's model writes.
const claudePlan = `{"plan": {"steps": [{"id": "s", "tool": "json_query", "arguments": {"query": ".a + .b", "input": {"a": 2, "b": 3}}}], "answer": "sum ${s.output.result}"}}`

func (f *fakeMessages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens": 10}`)
		return
	}
	var req struct {
		Model    string                  `json:"model"`
		Tools    []struct{ Name string } `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var names []string
	for _, tool := range req.Tools {
		names = append(names, tool.Name)
	}
	result, answered := toolResult(req.Messages)
	f.mu.Lock()
	if !slices.Contains(f.tools, agentOrchestrateInClaude) {
		f.tools = names
	}
	if answered {
		f.result = result
	}
	f.mu.Unlock()
	switch {
	case answered:
		streamAnswer(w, req.Model, textBlock("The sum is 5."), "end_turn")
	case slices.Contains(names, agentOrchestrateInClaude):
		streamAnswer(w, req.Model, toolUseBlock("toolu_orchestra_1", agentOrchestrateInClaude, claudePlan), "tool_use")
	default: // a side request (a title, a check), or orchestra missing: end here
		streamAnswer(w, req.Model, textBlock("ok"), "end_turn")
	}
}

// toolResult returns the text of the tool_result block in messages, if any.
func toolResult(messages []struct {
	Content json.RawMessage `json:"content"`
}) (string, bool) {
	for _, m := range messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return string(b.Content), true
			}
		}
	}
	return "", false
}

// A content block as the stream sends it: its start, then its deltas.
type streamBlock struct {
	start  map[string]any
	deltas []map[string]any
}

func textBlock(text string) streamBlock {
	return streamBlock{start: map[string]any{"type": "text", "text": ""},
		deltas: []map[string]any{{"type": "text_delta", "text": text}}}
}

func toolUseBlock(id, name, input string) streamBlock {
	return streamBlock{start: map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}},
		deltas: []map[string]any{{"type": "input_json_delta", "partial_json": input}}}
}

// streamAnswer writes one message of one content block as Messages API
// server-sent events.
func streamAnswer(w http.ResponseWriter, model string, block streamBlock, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": block.start})
	for _, d := range block.deltas {
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": d})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 5}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
