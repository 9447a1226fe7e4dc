package orchestrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// ToolName is the name of the orchestrate tool.
const ToolName = "agent_orchestrate"

// MCPTool returns the definition of agent_orchestrate: its description
// teaches a model how to write a plan and lists the tools a plan can call
// that are not listed to the client on their own (unlisted).
func MCPTool(unlisted []registry.Tool) *mcp.Tool {
	return &mcp.Tool{
		Name:         ToolName,
		Title:        "Run a multi-step tool plan",
		Description:  Describe(unlisted),
		InputSchema:  schemas.PortableInputOr(schemas.OrchestrateInput()),
		OutputSchema: schemas.PortableOr(schemas.EnvelopeLean()),
		Annotations: &mcp.ToolAnnotations{
			DestructiveHint: new(true),
			OpenWorldHint:   new(true),
		},
	}
}

const howTo = `Runs a multi-step tool plan in ONE call, not tool by tool. Send one of "plan", "prompt" (a goal) or "resume". A plan is checked against the tools' schemas first: on any problem nothing runs, all reported.

Steps run in order; {"parallel": [steps]} runs a group at once; "schedule": "dag" starts a step once its inputs are ready. Templates in argument strings:
- "$0.output.f" (step 0's output, typed), "$id.output.items[0].url" (by step id), "$bindings.name"
- "text ${id.output.title} text" interpolates.
A step's output is the tool's structured output or {"text": "..."}.

A plan's "answer" (text with ${...}) or "return" (a template value) comes back as artifact.answer or .result, not step outputs ("response": "full" has all).

` + exampleBuiltins + `

Step options: timeout_ms, retry {max_attempts, backoff_ms}, on_error: "continue", "when": "$c.output.ok" (runs if truthy). Group: merge "collect" | "first_success" | "all_settled". "dry_run": true only validates.
{"for_each": "$l.output.items", "do": {step using "$item.x", "$item_index"}} runs do per element, giving an array.
"background": true answers at once with how to await or cancel.
"client_tools" (yours) pause the run (artifact.pending); resume with {"resume": {"exec_id": "...", "results": {"<step id>": output}}}.`

// exampleBuiltins is the description's example plan, over built-in tools;
// exampleGeneric replaces it for a caller that may not call them.
const (
	exampleBuiltins = `Example:
{"plan": {"steps": [
 {"id": "q", "tool": "json_query", "arguments": {"query": ".n", "input": {"n": 2}}},
 {"id": "r", "tool": "render", "arguments": {"template": "n={{.n}}", "values": {"n": "$q.output.result"}}}
], "answer": "${r.output.text}"}}`
	exampleGeneric = `Example (TOOL_A and TOOL_B stand for your tools):
{"plan": {"steps": [
 {"id": "q", "tool": "TOOL_A", "arguments": {"query": "x"}},
 {"id": "r", "tool": "TOOL_B", "arguments": {"input": "$q.output.result"}}
], "answer": "${r.output.text}"}}`
)

// maxUnlistedBytes caps what the description spends on the tools a plan
// can call that tools/list does not show; orchestra_tools describes the
// rest.
const maxUnlistedBytes = 120

// Describe returns the description of agent_orchestrate: how to write a
// plan, then the tools a plan can call that are not listed to the client
// on their own (unlisted): a line each while they fit, then their number.
// The listed tools are not repeated: the client has their definitions.
func Describe(unlisted []registry.Tool) string { return describe(howTo, unlisted) }

// DescribeFor is Describe for a caller that may call only the tools
// callable accepts (a tenant's): unlisted holds only such tools, and the
// example plan names none it may not call.
func DescribeFor(unlisted []registry.Tool, callable func(name string) bool) string {
	text := howTo
	if !callable("json_query") || !callable("render") {
		text = strings.Replace(text, exampleBuiltins, exampleGeneric, 1)
	}
	return describe(text, unlisted)
}

func describe(text string, unlisted []registry.Tool) string {
	var b strings.Builder
	b.WriteString(text)
	if len(unlisted) == 0 {
		return b.String()
	}
	fmt.Fprintf(&b, "\n\nTools a plan can call besides the listed ones (%d):", len(unlisted))
	used := 0
	for i, t := range unlisted {
		line := fmt.Sprintf("\n- %s: %s", t.Name, firstLine(t.Description))
		if used+len(line) > maxUnlistedBytes {
			fmt.Fprintf(&b, "\n- and %d more: orchestra_tools describes them", len(unlisted)-i)
			break
		}
		b.WriteString(line)
		used += len(line)
	}
	return b.String()
}

// firstLine returns the first sentence or line of s, at most 160 bytes.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if len(s) > 160 {
		s = s[:textcut.Index(s, 157)] + "..."
	}
	if s == "" {
		s = "(no description)"
	}
	return s
}

// HandlerOptions configure the MCP handler of agent_orchestrate.
type HandlerOptions struct {
	// MaxRequestBytes caps the arguments of one call. Default 4 MiB.
	MaxRequestBytes int
	// Gate bounds the nesting and the values of the arguments (and of a
	// plan sent as a JSON string in them); zero fields take the decoding
	// gate's defaults (jsongate.DefaultDepth, jsongate.DefaultElements).
	Gate jsongate.Limits
	// Prompt runs the prompt path with engine e; nil means no planner is
	// configured. It returns the tool's result: usually [Result] of the
	// run's envelope, or a result asking the client for input (multi
	// round-trip sampling).
	Prompt func(ctx context.Context, e *Engine, req *mcp.CallToolRequest, r *Request) *mcp.CallToolResult
	// Background, when set, takes a request with "background": true: it
	// calls start, which runs the request as the handler would and returns
	// its result, on a context of its own, and answers once the run passed
	// its checks (see [Engine.RunningEnvelope]). Without it such a request
	// is refused.
	Background func(ctx context.Context, req *mcp.CallToolRequest, r *Request, start StartFunc) *mcp.CallToolResult
	// Control, when set, answers await and cancel; without it they are
	// refused.
	Control func(ctx context.Context, req *mcp.CallToolRequest, r *Request) *mcp.CallToolResult
	// Result turns a run's envelope into the tool's result; nil means
	// [ResultFor] at the request's protocol. A server that asks the user
	// of a paused run through the protocol's input requests answers with
	// them instead.
	Result func(req *mcp.CallToolRequest, env *Envelope) *mcp.CallToolResult
	// Finished, when set, sees a plan's request and envelope after the
	// run, before the caller is answered (it keeps a save_as). The prompt
	// path's Prompt does the same itself.
	Finished func(ctx context.Context, r *Request, env *Envelope)
	// Fallback, when set, returns what goes on, with engine e, with a run
	// a resume takes up that paused in its planner's fallback
	// ([Engine.WithFallback]); nil when no planner can.
	Fallback func(e *Engine, req *mcp.CallToolRequest) *Fallback
}

// StartFunc runs a decoded request with engine e (the plan, prompt or
// resume path) and returns the tool's result.
type StartFunc func(ctx context.Context, e *Engine) *mcp.CallToolResult

// Handler returns the MCP handler of agent_orchestrate.
func (e *Engine) Handler(opts HandlerOptions) mcp.ToolHandler {
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = 4 << 20
	}
	if opts.Gate.Depth == 0 {
		opts.Gate.Depth = jsongate.DefaultDepth
	}
	if opts.Gate.Elements == 0 {
		opts.Gate.Elements = jsongate.DefaultElements
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = e.requestContext(ctx, req)
		Result := func(env *Envelope) *mcp.CallToolResult { return ResultFor(env, req.ProtocolVersion()) }
		if opts.Result != nil {
			Result = func(env *Envelope) *mcp.CallToolResult { return opts.Result(req, env) }
		}
		args := req.Params.Arguments
		if len(args) > opts.MaxRequestBytes {
			return Result(e.Reject(ctx, []*Issue{{Code: CodeTooLarge, Message: fmt.Sprintf("the request is %d bytes; the limit is %d (server.max_request_bytes). Send a smaller plan, pass large data by reference (a URL or a step that fetches it), or raise server.max_request_bytes in the configuration file", len(args), opts.MaxRequestBytes)}})), nil
		}
		r, issues := decodeInput(args, opts.Gate)
		if len(issues) > 0 {
			return Result(e.Reject(ctx, issues)), nil
		}
		if r.ContextID != "" { // the input's names the conversation, over _meta's
			ids, _ := toolcontext.IDsFrom(ctx)
			ids.ContextID = r.ContextID
			ctx = toolcontext.WithIDs(ctx, ids)
		}
		if r.Await != nil || r.Cancel != nil {
			if opts.Control == nil {
				return Result(e.Reject(ctx, []*Issue{{Code: CodeInvalidRequest, Message: "await and cancel act on background runs, which this caller cannot start; send a plan or a prompt"}})), nil
			}
			return opts.Control(ctx, req, r), nil
		}
		start := func(ctx context.Context, e *Engine) *mcp.CallToolResult {
			// The request's budget tree: its root, unless it runs for
			// work that has one (an agent's nested plan draws from the
			// agent's). The run it answers with keeps its bytes counted
			// until the response is encoded.
			ctx = e.Budgeted(ctx, r)
			ctx, ans := withAnswer(ctx)
			defer ans.release()
			if r.Resume != nil {
				re := e
				if opts.Fallback != nil {
					re = e.WithFallback(opts.Fallback(e, req))
				}
				return Result(re.Resume(ctx, r)) // whatever a planner is
			}
			if r.Plan == nil {
				if opts.Prompt == nil {
					return Result(e.Reject(ctx, []*Issue{{Path: "prompt", Code: CodePlannerFailed, Message: "no planner is configured, so a prompt cannot be turned into a plan: send a \"plan\" instead, or configure a planner (the planner block of the configuration file)"}}))
				}
				return opts.Prompt(ctx, e, req, r)
			}
			env := e.Run(ctx, r)
			if opts.Finished != nil {
				opts.Finished(ctx, r, env)
			}
			return Result(env)
		}
		if r.Background {
			if opts.Background == nil {
				return Result(e.Reject(ctx, []*Issue{{Path: "background", Code: CodeInvalidRequest, Message: "this caller cannot start background runs (a plan's own steps wait for their runs); send the request without background"}})), nil
			}
			return opts.Background(ctx, req, r, start), nil
		}
		return start(ctx, e), nil
	}
}

// requestContext puts the depth, trace and ids of an incoming request into ctx.
func (e *Engine) requestContext(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	meta := req.Params.GetMeta()
	ctx = toolcontext.FromMeta(ctx, meta)
	ids, _ := toolcontext.IDsFrom(ctx)
	if tp, ok := meta[toolcontext.MetaTraceparent].(string); ok && tp != "" {
		if parts := strings.Split(tp, "-"); len(parts) == 4 && ids.TraceID == "" {
			ids.TraceID = parts[1]
		}
	}
	if ids.RequestID == "" {
		ids.RequestID = uuid.NewString()
	}
	if ids.ContextID == "" && req.Session != nil {
		ids.ContextID = req.Session.ID()
	}
	return toolcontext.WithIDs(ctx, ids)
}

// Reject returns the envelope of a request that cannot run: it carries
// issues as validation errors and runs nothing.
func (e *Engine) Reject(ctx context.Context, issues []*Issue) *Envelope {
	return e.newRun(ctx, &Request{}).reject(issues)
}
