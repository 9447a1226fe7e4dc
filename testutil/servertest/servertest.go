// Package servertest checks a running orchestra MCP server end to end
// through a real client session, whatever the transport: in memory, stdio
// or Streamable HTTP.
//
// The checks call a probe tool, a tool of the server's catalog whose calls
// the test can count, so that "runs nothing" is observed rather than
// inferred from the response:
//
//	cs, _ := client.Connect(ctx, transport, nil)
//	servertest.Run(t, cs, servertest.Probe{Tool: "probe", Args: ..., Calls: ...})
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Probe is a tool of the server under test whose calls the test counts.
type Probe struct {
	// Tool is the probe's catalog name.
	Tool string
	// Args returns the arguments of a call whose output carries label at
	// LabelPath. label may hold templates.
	Args func(label string) map[string]any
	// LabelPath is where the label is in the probe's output, e.g. ".label".
	LabelPath string
	// Calls returns how many times the probe has been called.
	Calls func() int
}

// Builtins are the tools every orchestra lists next to agent_orchestrate.
var Builtins = []string{"json_query", "render"}

// Run runs every check against cs. The checks run in sequence on the one
// session, and each ends by checking that the session still answers.
func Run(t *testing.T, cs *mcp.ClientSession, p Probe) {
	t.Run("tools_list", func(t *testing.T) { ToolsList(t, cs, p) })
	t.Run("parallel_plan", func(t *testing.T) { ParallelPlan(t, cs, p) })
	t.Run("invalid_plan", func(t *testing.T) { InvalidPlan(t, cs, p) })
	t.Run("failing_step", func(t *testing.T) { FailingStep(t, cs, p) })
	t.Run("dry_run", func(t *testing.T) { DryRun(t, cs, p) })
	t.Run("depth_exceeded", func(t *testing.T) { DepthExceeded(t, cs, p) })
	t.Run("bad_input", func(t *testing.T) { BadInput(t, cs, p) })
}

// ToolsList checks that tools/list shows agent_orchestrate, the built-ins
// and the probe, each with an input and an output schema, and that the
// description of agent_orchestrate does not repeat them.
func ToolsList(t *testing.T, cs *mcp.ClientSession, p Probe) {
	ctx := t.Context()
	got := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		got[tool.Name] = tool
	}
	for _, name := range append([]string{orchestrate.ToolName, p.Tool}, Builtins...) {
		tool, ok := got[name]
		if !ok {
			t.Errorf("tools/list has no %s; it has %v", name, keys(got))
			continue
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", name)
		}
		if typeOf(tool.InputSchema) != "object" {
			t.Errorf("%s: inputSchema = %v, want an object schema", name, tool.InputSchema)
		}
		if typeOf(tool.OutputSchema) != "object" {
			t.Errorf("%s: outputSchema = %v, want an object schema", name, tool.OutputSchema)
		}
	}
	if tool := got[orchestrate.ToolName]; tool != nil {
		// The client has the listed tools' definitions: the description
		// does not repeat them.
		for _, name := range append([]string{p.Tool}, Builtins...) {
			if strings.Contains(tool.Description, "\n- "+name+": ") {
				t.Errorf("the description of %s repeats the listed tool %s", orchestrate.ToolName, name)
			}
		}
	}
}

// ParallelPlan runs a plan with a parallel group and templates and checks
// the envelope, its text duplicate, and the values passed between steps.
func ParallelPlan(t *testing.T, cs *mcp.ClientSession, p Probe) {
	before := p.Calls()
	args := map[string]any{
		"plan": map[string]any{"steps": []any{
			map[string]any{"id": "first", "tool": p.Tool, "arguments": p.Args("a")},
			map[string]any{"id": "group", "parallel": []any{
				map[string]any{"id": "count", "tool": "json_query", "arguments": map[string]any{"query": "length", "input": "$bindings.items"}},
				map[string]any{"id": "echo", "tool": p.Tool, "arguments": p.Args("${first.output" + p.LabelPath + "}-b")},
			}},
			map[string]any{"id": "report", "tool": "render", "arguments": map[string]any{
				"template": "{{.n}} items, {{.a}}, {{.b}}",
				"values": map[string]any{
					"n": "$count.output.result",
					"a": "$first.output" + p.LabelPath,
					"b": "$group.output.echo" + p.LabelPath,
				},
			}},
		}},
		"bindings": map[string]any{"items": []any{1, 2, 3}},
	}
	res, env := Call(t, cs, args, nil)
	if res.IsError {
		t.Fatalf("isError; want success:\n%s", text(res))
	}
	if env.Artifact.Status != "success" || !env.Artifact.Success {
		t.Errorf("status = %q, success = %v; want success", env.Artifact.Status, env.Artifact.Success)
	}
	if got := p.Calls() - before; got != 2 {
		t.Errorf("the probe ran %d times; want 2", got)
	}
	ids := []string{}
	for _, s := range env.Artifact.Steps {
		ids = append(ids, s.ID+":"+s.Status)
		for _, c := range s.Children {
			ids = append(ids, "  "+c.ID+":"+c.Status)
		}
	}
	want := []string{"first:success", "group:success", "  count:success", "  echo:success", "report:success"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if n := len(env.Artifact.Steps); n == 3 {
		out, _ := env.Artifact.Steps[2].Output.(map[string]any)
		if got, want := out["text"], "3 items, a, a-b"; got != want {
			t.Errorf("report text = %q, want %q", got, want)
		}
	}
}

// InvalidPlan checks that a plan with errors runs nothing and reports every
// error with its code.
func InvalidPlan(t *testing.T, cs *mcp.ClientSession, p Probe) {
	before := p.Calls()
	args := map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "first", "tool": p.Tool, "arguments": p.Args("a")},
		map[string]any{"tool": "json_qeury", "arguments": map[string]any{"query": ".", "input": 1}},
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "{{.x}}", "values": map[string]any{"x": "$nope.output.x"}}},
	}}}
	res, env := Call(t, cs, args, nil)
	if !res.IsError {
		t.Errorf("isError = false for an invalid plan")
	}
	if got := p.Calls() - before; got != 0 {
		t.Errorf("the probe ran %d times for an invalid plan; want 0", got)
	}
	codes := map[orchestrate.Code]Issue{}
	for _, i := range env.Artifact.ValidationErrors {
		codes[i.Code] = i
		if i.Message == "" {
			t.Errorf("validation error %+v has no message", i)
		}
	}
	if i, ok := codes[orchestrate.CodeUnknownTool]; !ok {
		t.Errorf("no %s error in %+v", orchestrate.CodeUnknownTool, env.Artifact.ValidationErrors)
	} else if !slices.Contains(i.Suggestions, "json_query") && !strings.Contains(i.Message, "json_query") {
		t.Errorf("the unknown tool error does not suggest json_query: %+v", i)
	}
	if _, ok := codes[orchestrate.CodeUnknownRef]; !ok {
		t.Errorf("no %s error in %+v", orchestrate.CodeUnknownRef, env.Artifact.ValidationErrors)
	}
	for _, s := range env.Artifact.Steps {
		if s.Status == "success" || s.Status == "failed" {
			t.Errorf("step %s has status %s in a plan that must not run", s.ID, s.Status)
		}
	}
}

// FailingStep checks that a failing step halts the plan: earlier outputs
// are kept and later steps are skipped.
func FailingStep(t *testing.T, cs *mcp.ClientSession, p Probe) {
	before := p.Calls()
	args := map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"id": "first", "tool": p.Tool, "arguments": p.Args("a")},
		map[string]any{"id": "boom", "tool": "json_query", "arguments": map[string]any{"query": `error("boom")`, "input": 1}},
		map[string]any{"id": "last", "tool": p.Tool, "arguments": p.Args("c")},
	}}}
	res, env := Call(t, cs, args, nil)
	if !res.IsError {
		t.Errorf("isError = false for a failed plan")
	}
	if env.Artifact.Success || env.Artifact.Status != "failed" {
		t.Errorf("status = %q, success = %v; want failed", env.Artifact.Status, env.Artifact.Success)
	}
	if got := p.Calls() - before; got != 1 {
		t.Errorf("the probe ran %d times; want 1 (the step after the failure must not run)", got)
	}
	var got []string
	for _, s := range env.Artifact.Steps {
		got = append(got, s.ID+":"+s.Status)
	}
	if diff := cmp.Diff([]string{"first:success", "boom:failed", "last:skipped"}, got); diff != "" {
		t.Fatalf("steps (-want +got):\n%s", diff)
	}
	if env.Artifact.Steps[0].Output == nil {
		t.Errorf("the output of the step before the failure is gone")
	}
	if e := env.Artifact.Steps[1].Error; e == nil || e.Code == "" || !strings.Contains(e.Message, "boom") {
		t.Errorf("the failed step's error = %+v; want a code and the tool's message", e)
	}
}

// DryRun checks that dry_run validates and runs nothing.
func DryRun(t *testing.T, cs *mcp.ClientSession, p Probe) {
	before := p.Calls()
	args := map[string]any{"dry_run": true, "plan": map[string]any{"steps": []any{
		map[string]any{"id": "first", "tool": p.Tool, "arguments": p.Args("a")},
		map[string]any{"id": "second", "tool": p.Tool, "arguments": p.Args("${first.output" + p.LabelPath + "}")},
	}}}
	res, env := Call(t, cs, args, nil)
	if res.IsError || !env.Artifact.Success || !env.Artifact.DryRun {
		t.Errorf("isError = %v, success = %v, dry_run = %v; want a successful dry run:\n%s", res.IsError, env.Artifact.Success, env.Artifact.DryRun, text(res))
	}
	if got := p.Calls() - before; got != 0 {
		t.Errorf("the probe ran %d times in a dry run; want 0", got)
	}
	if env.Artifact.Plan == nil {
		t.Errorf("a dry run returns no normalized plan")
	}
}

// DepthExceeded checks that a request whose _meta carries the depth limit
// runs nothing and fails with depth_exceeded.
func DepthExceeded(t *testing.T, cs *mcp.ClientSession, p Probe) {
	before := p.Calls()
	args := map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": p.Tool, "arguments": p.Args("a")},
	}}}
	res, env := Call(t, cs, args, mcp.Meta{toolcontext.MetaDepth: orchestrate.DefaultLimits().MaxDepth})
	if !res.IsError {
		t.Errorf("isError = false at the depth limit")
	}
	if got := p.Calls() - before; got != 0 {
		t.Errorf("the probe ran %d times at the depth limit; want 0", got)
	}
	var codes []orchestrate.Code
	for _, e := range env.Artifact.Errors {
		codes = append(codes, e.Code)
	}
	if !slices.Contains(codes, orchestrate.CodeDepthExceeded) {
		t.Errorf("errors = %v; want %s", codes, orchestrate.CodeDepthExceeded)
	}
	if env.Metadata.Depth != orchestrate.DefaultLimits().MaxDepth {
		t.Errorf("_metadata.depth = %d, want %d", env.Metadata.Depth, orchestrate.DefaultLimits().MaxDepth)
	}
}

// BadInput sends wrong types, unknown fields, non-object arguments and
// unknown tools, checks each answer says how to fix it, and that the
// session answers normally afterwards.
func BadInput(t *testing.T, cs *mcp.ClientSession, p Probe) {
	ctx := t.Context()
	cases := []struct {
		name string
		args any
		code orchestrate.Code
		hint string // a part of the message
	}{
		{"wrong type of steps", map[string]any{"plan": map[string]any{"steps": "all of them"}}, orchestrate.CodeInvalidValue, "steps"},
		{"wrong type of dry_run", map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "x"}}}}, "dry_run": "yes"}, orchestrate.CodeInvalidValue, "true or false"},
		{"unknown field", map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "x"}}}}, "bindigns": map[string]any{}}, orchestrate.CodeUnknownField, "bindings"},
		{"arguments that are a string", json.RawMessage(`"{\"plan\": 1}"`), orchestrate.CodeInvalidRequest, "JSON object"},
		{"arguments that are an array", []any{1, 2}, orchestrate.CodeInvalidRequest, "JSON object"},
		{"plan as a JSON string that is broken", map[string]any{"plan": `{"steps": [`}, orchestrate.CodeInvalidValue, "JSON object"},
		{"neither plan nor prompt", map[string]any{}, orchestrate.CodeInvalidRequest, "plan"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Calls()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: tc.args})
			if err != nil {
				t.Fatalf("tools/call: %v; want a tool error the model can act on", err)
			}
			env := Decode(t, res)
			if !res.IsError {
				t.Errorf("isError = false")
			}
			var found bool
			for _, i := range env.Artifact.ValidationErrors {
				if i.Code == tc.code && strings.Contains(i.Message, tc.hint) {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s error mentioning %q in %+v", tc.code, tc.hint, env.Artifact.ValidationErrors)
			}
			if got := p.Calls() - before; got != 0 {
				t.Errorf("the probe ran %d times", got)
			}
			StillServes(t, cs)
		})
	}
	t.Run("unknown tool", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_qeury", Arguments: map[string]any{}})
		if err == nil {
			t.Fatalf("calling an unknown tool succeeded")
		}
		if !strings.Contains(err.Error(), `"json_query"`) {
			t.Errorf("error %q does not suggest json_query", err)
		}
		StillServes(t, cs)
	})
	t.Run("direct call with wrong arguments", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "json_query", Arguments: map[string]any{"query": 42}})
		if err != nil {
			t.Fatalf("tools/call: %v; want a tool error", err)
		}
		if !res.IsError {
			t.Errorf("isError = false for wrong arguments:\n%s", text(res))
		}
		if text(res) == "" {
			t.Errorf("the tool error has no message")
		}
		StillServes(t, cs)
	})
}

// StillServes checks that cs answers a plain plan.
func StillServes(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	args := map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "ok {{.n}}", "values": map[string]any{"n": 1}}},
	}}}
	res, env := Call(t, cs, args, nil)
	if res.IsError || !env.Artifact.Success {
		t.Fatalf("the session does not answer normally any more:\n%s", text(res))
	}
}

// Envelope is the part of agent_orchestrate's structured content the checks
// read.
type Envelope struct {
	ArtifactID string `json:"artifact_id"`
	Artifact   struct {
		Status           string  `json:"status"`
		Success          bool    `json:"success"`
		DryRun           bool    `json:"dry_run"`
		Plan             any     `json:"plan"`
		Steps            []*Step `json:"steps"`
		Errors           []Error `json:"errors"`
		ValidationErrors []Issue `json:"validation_errors"`
		Pending          []struct {
			CallID string `json:"call_id"`
			Step   string `json:"step"`
			Tool   string `json:"tool"`
		} `json:"pending"`
	} `json:"artifact"`
	Metadata struct {
		RequestID string `json:"request_id"`
		ToolName  string `json:"tool_name"`
		Depth     int    `json:"depth"`
	} `json:"_metadata"`
}

// Step is a step record of the envelope.
type Step struct {
	ID       string  `json:"id"`
	ExecID   string  `json:"exec_id"`
	Status   string  `json:"status"`
	Output   any     `json:"output"`
	Error    *Error  `json:"error"`
	Children []*Step `json:"children"`
}

// Error is a failure in the envelope.
type Error struct {
	StepID  string           `json:"step_id"`
	Code    orchestrate.Code `json:"code"`
	Message string           `json:"message"`
}

// Issue is a validation error in the envelope.
type Issue struct {
	Path        string           `json:"path"`
	Code        orchestrate.Code `json:"code"`
	Message     string           `json:"message"`
	Suggestions []string         `json:"suggestions"`
}

// Call calls agent_orchestrate with args and meta and decodes the envelope.
// It fails the test on a protocol error.
func Call(t *testing.T, cs *mcp.ClientSession, args any, meta mcp.Meta) (*mcp.CallToolResult, *Envelope) {
	t.Helper()
	return CallContext(t.Context(), t, cs, args, meta)
}

// CallContext is Call with a context. Arguments given as a map that names
// no response ask for the full one, whose envelope the tests read.
func CallContext(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args any, meta mcp.Meta) (*mcp.CallToolResult, *Envelope) {
	t.Helper()
	if m, ok := args.(map[string]any); ok {
		if _, named := m["response"]; !named {
			m = maps.Clone(m)
			m["response"] = orchestrate.ResponseFull
			args = m
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("calling %s: %v", orchestrate.ToolName, err)
	}
	return res, Decode(t, res)
}

// Decode checks that the result carries the envelope as structured content
// and two text blocks (a summary line, then exactly the same JSON), and
// decodes it.
func Decode(t *testing.T, res *mcp.CallToolResult) *Envelope {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatalf("no structuredContent:\n%s", text(res))
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 && len(res.Content) != 2 {
		t.Fatalf("%d content blocks; want the summary, then (full response) the JSON", len(res.Content))
	}
	summary, ok1 := res.Content[0].(*mcp.TextContent)
	if !ok1 {
		t.Fatalf("the first content block is not text: %T", res.Content[0])
	}
	if summary.Text == "" || strings.HasPrefix(summary.Text, "{") {
		t.Fatalf("the first text block is not a summary:\n%s", summary.Text)
	}
	txt := string(structured)
	if len(res.Content) == 2 {
		js, ok := res.Content[1].(*mcp.TextContent)
		if !ok {
			t.Fatalf("the second content block is not text: %T", res.Content[1])
		}
		txt = js.Text
	}
	var fromText, fromStructured any
	if err := json.Unmarshal([]byte(txt), &fromText); err != nil {
		t.Fatalf("the second text block is not JSON: %v\n%s", err, txt)
	}
	if err := json.Unmarshal(structured, &fromStructured); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromStructured, fromText); diff != "" {
		t.Errorf("the text JSON differs from structuredContent (-structured +text):\n%s", diff)
	}
	var env Envelope
	if err := json.Unmarshal(structured, &env); err != nil {
		t.Fatalf("decoding the envelope: %v", err)
	}
	if env.ArtifactID == "" || (len(res.Content) == 2 && env.Metadata.ToolName != orchestrate.ToolName) {
		t.Errorf("envelope without artifact_id or _metadata.tool_name: %s", structured)
	}
	return &env
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Text returns the text content of res.
func Text(res *mcp.CallToolResult) string { return text(res) }

func typeOf(schema any) string {
	data, err := json.Marshal(schema)
	if err != nil {
		return ""
	}
	var m struct {
		Type any `json:"type"`
	}
	_ = json.Unmarshal(data, &m)
	return fmt.Sprint(m.Type)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// SyncBuffer is a buffer safe for concurrent writers: a logger or a
// subprocess's stderr copier writing while a test reads.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
