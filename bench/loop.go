package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// loopFiles is how many files the loop job reads.
const loopFiles = 20

const loopGoal = "List the files of /docs, read every one of them and write a report that quotes each file's first line."

// loopTools are the tools of the loop job: list_files lists loopFiles
// names, read_file returns about a kilobyte of text per file; both take
// lat.
func loopTools(lat time.Duration) []registry.Tool {
	schema := func(s string) *jsonschema.Schema {
		var out jsonschema.Schema
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			panic(err)
		}
		return &out
	}
	list := registry.Tool{
		Name: "list_files", Description: "List the files of a directory.", Source: "bench",
		InputSchema:  schema(`{"type":"object","properties":{"dir":{"type":"string"}},"required":["dir"]}`),
		OutputSchema: schema(`{"type":"object","properties":{"files":{"type":"array","items":{"type":"string"}}}}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			files := make([]any, loopFiles)
			for i := range files {
				files[i] = fmt.Sprintf("/docs/file%02d.md", i)
			}
			return &registry.Result{Structured: map[string]any{"files": files}}, nil
		},
	}
	read := registry.Tool{
		Name: "read_file", Description: "Read a text file.", Source: "bench",
		InputSchema:  schema(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		OutputSchema: schema(`{"type":"object","properties":{"content":{"type":"string"}}}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			path, _ := req.Arguments["path"].(string)
			text := "# " + path + "\n" + strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 18)
			return &registry.Result{Structured: map[string]any{"content": text}}, nil
		},
	}
	return []registry.Tool{withLatency(list, lat), withLatency(read, lat), builtin.Render(builtin.DefaultConfig().Render, builtin.Options{})}
}

// loopPlan is the job as one plan: list, read each file four at a time,
// render the report.
const loopPlan = `{"type":"tool_calls","reasoning":"list, read each, report","calls":[
	{"id":"list","tool_name":"list_files","arguments":{"dir":"/docs"}},
	{"id":"reads","for_each":"$list.output.files","as":"file","max_concurrency":4,
	 "do":{"tool_name":"read_file","arguments":{"path":"$file"}}},
	{"id":"report","tool_name":"render","arguments":{"template":"{{range .reads}}{{.content}}\n{{end}}","values":{"reads":"$reads.output"}}}]}`

// loopJob compares the job of listing 20 files, reading each and writing
// a report, done as one orchestra call (the planner writes the plan with a
// loop, orchestra runs it, the model answers) and as a ReAct loop (one
// model call per tool call, then the answer).
func loopJob(ctx context.Context, c *options, r *report) error {
	mlat, tlat := c.modelLatency, c.toolLatency
	if c.quick {
		mlat, tlat = mlat/100, tlat/100
	}
	tools := loopTools(tlat)
	byName := map[string]registry.Tool{}
	for _, t := range tools {
		byName[t.Name] = t
	}

	// ReAct: list, then one read per turn, then the answer.
	var calls []llm.ToolCall
	calls = append(calls, llm.ToolCall{ID: "call_0", Name: "list_files", Arguments: json.RawMessage(`{"dir":"/docs"}`)})
	for i := range loopFiles {
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("call_%d", i+1), Name: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"path":"/docs/file%02d.md"}`, i))})
	}
	var defs []llm.ToolDef
	for _, t := range tools[:2] {
		var params map[string]any
		data, _ := json.Marshal(t.InputSchema)
		_ = json.Unmarshal(data, &params)
		defs = append(defs, llm.ToolDef{Name: t.Name, Description: t.Description, Parameters: params})
	}
	next := 0
	m := &simModel{latency: mlat, answer: func(req *llm.Request) *llm.Response {
		if next == len(calls) {
			return &llm.Response{Text: finalAnswer(loopGoal), StopReason: llm.StopEndTurn}
		}
		next++
		return &llm.Response{ToolCalls: calls[next-1 : next], StopReason: llm.StopToolUse}
	}}
	var react taskResult
	msgs := []llm.Message{{Role: llm.RoleUser, Content: loopGoal}}
	toolCalls := 0
	start := time.Now()
	for {
		resp, err := m.Generate(ctx, &llm.Request{System: reactSystem, Messages: msgs, Tools: defs})
		if err != nil {
			return err
		}
		react.calls++
		react.tokensIn += resp.Usage.InputTokens
		react.tokensOut += resp.Usage.OutputTokens
		if len(resp.ToolCalls) == 0 {
			break
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			var args map[string]any
			if err := json.Unmarshal(tc.Arguments, &args); err != nil {
				return err
			}
			out, err := byName[tc.Name].Invoke(ctx, &registry.CallRequest{Arguments: args})
			if err != nil {
				return fmt.Errorf("%s: %w", tc.Name, err)
			}
			toolCalls++
			data, _ := json.Marshal(out.Output())
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Content: string(data)})
		}
	}
	react.wall = time.Since(start)

	// orchestra: one call on the prompt path.
	cat := registry.NewCatalog(tools...)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat})
	om := &simModel{latency: mlat, answer: func(req *llm.Request) *llm.Response {
		if len(req.Tools) > 0 && req.Tools[0].Name == planner.ToolName {
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "plan", Name: planner.ToolName, Arguments: json.RawMessage(loopPlan)}}, StopReason: llm.StopToolUse}
		}
		return &llm.Response{Text: finalAnswer(loopGoal), StopReason: llm.StopEndTurn}
	}}
	p := planner.New(planner.Options{Catalog: cat, Engine: e, Model: om})
	start = time.Now()
	env, err := p.Ask(ctx, &orchestrate.Request{Prompt: loopGoal})
	wall := time.Since(start)
	if err != nil {
		return err
	}
	a := env.Artifact
	if !a.Success || a.Planner == nil {
		return fmt.Errorf("the loop plan did not succeed: %s %v %v", a.Status, a.Errors, a.ValidationErrors)
	}
	orch := taskResult{calls: a.Planner.ModelCalls, tokensIn: a.Planner.InputTokens, tokensOut: a.Planner.OutputTokens, wall: wall}
	orchTools := 0
	var count func([]*orchestrate.StepRecord)
	count = func(rs []*orchestrate.StepRecord) {
		for _, rec := range rs {
			if rec.Type == "tool" && rec.StartedAt != nil {
				orchTools++
			}
			count(rec.Children)
		}
	}
	count(a.Steps)

	fmt.Fprintf(r.w, "list %d files, read each, report: model latency %s per call, tool latency %s, tokens = JSON bytes / 4\n", loopFiles, mlat, tlat)
	rows := [][]string{}
	for _, row := range []struct {
		name  string
		t     taskResult
		tools int
	}{{"ReAct", react, toolCalls}, {"orchestra (one call, for_each)", orch, orchTools}} {
		rows = append(rows, []string{row.name, itoa(row.t.calls), itoa(row.tools), itoa(row.t.tokensIn), itoa(row.t.tokensOut), itoa(row.t.tokensIn + row.t.tokensOut),
			f1(msf(row.t.wall)), f2(float64(react.wall) / float64(row.t.wall)), f2(float64(react.tokensIn+react.tokensOut) / float64(row.t.tokensIn+row.t.tokensOut))})
	}
	return r.table("loop", []string{"approach", "model_calls", "tool_calls", "tokens_in", "tokens_out", "tokens", "wall_ms", "speedup", "token_ratio"}, rows)
}
