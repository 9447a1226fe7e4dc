package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// ToolName is the name of the orchestrate tool.
const ToolName = "agent_orchestrate"

// MCPTool returns the definition of agent_orchestrate for a catalog's tools:
// its description teaches a model how to write a plan and lists every tool
// a plan can call.
func MCPTool(tools []registry.Tool) *mcp.Tool {
	return &mcp.Tool{
		Name:         ToolName,
		Title:        "Run a multi-step tool plan",
		Description:  Describe(tools),
		InputSchema:  schemas.PortableOr(schemas.OrchestrateInput()),
		OutputSchema: schemas.PortableOr(schemas.Envelope()),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run a multi-step tool plan",
			DestructiveHint: boolPtr(true),
			OpenWorldHint:   boolPtr(true),
		},
	}
}

func boolPtr(b bool) *bool { return &b }

const howTo = `Runs a whole multi-step tool plan in ONE call and returns every result: call this instead of calling tools one by one.

Steps run in order; a step can use the output of any earlier step through templates, and a "parallel" group runs its steps at the same time. The plan is checked against the tools' schemas before anything runs, and every problem is reported at once.

Templates (in argument strings):
- "$0.output.field" - the output of step 0 (steps count from 0), type kept; "$research.output.items[0].url" - by step id.
- "$bindings.name" - a value from the request's "bindings".
- "Summary: ${research.output.title} (${1.output.count})" - inside longer text.
- A step's output is the tool's structured output; a tool without one gives {"text": "..."}.

Example:
{"plan": {"steps": [
  {"id": "a", "tool": "json_query", "arguments": {"query": ".items | length", "input": {"items": [1, 2]}}},
  {"id": "both", "parallel": [
    {"id": "x", "tool": "render", "arguments": {"template": "count={{.n}}", "values": {"n": "$a.output.result"}}},
    {"id": "y", "tool": "render", "arguments": {"template": "hi {{.who}}", "values": {"who": "$bindings.user"}}}
  ]},
  {"tool": "render", "arguments": {"template": "{{.x}} / {{.y}}", "values": {"x": "$x.output.text", "y": "$both.output.y.text"}}}
]}, "bindings": {"user": "Ada"}}

Step options: "timeout_ms", "retry": {"max_attempts": 3, "backoff_ms": 200} (transient failures only), "on_error": "continue". Group options: "max_concurrency", "merge": "collect" (default; an object keyed by child id) | "first_success" | "all_settled". Plan option: "schedule": "dag" starts each step as soon as the steps it references have finished. Set "dry_run": true to only validate.
{"id": "reads", "for_each": "$list.output.items", "do": {<step using "$item.path", "$item_index">}, "max_concurrency": 4} runs do per element; its output is the array of their outputs. Any step may have "when": "$check.output.ok" to run only when that value is truthy.`

// Describe returns the description of agent_orchestrate: how to write a
// plan, then a one-line summary of each tool a plan can call.
func Describe(tools []registry.Tool) string {
	var b strings.Builder
	b.WriteString(howTo)
	fmt.Fprintf(&b, "\n\nTools a plan can call (%d):", len(tools))
	if len(tools) == 0 {
		b.WriteString("\n(none are available right now)")
	}
	for _, t := range tools {
		fmt.Fprintf(&b, "\n- %s: %s", t.Name, firstLine(t.Description))
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
		cut := 157
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	if s == "" {
		s = "(no description)"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// HandlerOptions configure the MCP handler of agent_orchestrate.
type HandlerOptions struct {
	// MaxRequestBytes caps the arguments of one call. Default 4 MiB.
	MaxRequestBytes int
	// Prompt runs the prompt path; nil means no planner is configured. It
	// returns the tool's result: usually [Result] of the run's envelope, or
	// a result asking the client for input (multi round-trip sampling).
	Prompt func(ctx context.Context, req *mcp.CallToolRequest, r *Request) *mcp.CallToolResult
}

// Handler returns the MCP handler of agent_orchestrate.
func (e *Engine) Handler(opts HandlerOptions) mcp.ToolHandler {
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = 4 << 20
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx = e.requestContext(ctx, req)
		args := req.Params.Arguments
		if len(args) > opts.MaxRequestBytes {
			return Result(e.Reject(ctx, []*Issue{{Code: CodeTooLarge, Message: fmt.Sprintf("the request is %d bytes; the limit is %d (server.max_request_bytes). Send a smaller plan, pass large data by reference (a URL or a step that fetches it), or raise server.max_request_bytes in the configuration file", len(args), opts.MaxRequestBytes)}})), nil
		}
		r, issues := decodeInput(args)
		if len(issues) > 0 {
			return Result(e.Reject(ctx, issues)), nil
		}
		if r.Resume != nil {
			return Result(e.Resume(ctx, r)), nil // whatever a planner is
		}
		if r.Plan == nil {
			if opts.Prompt == nil {
				return Result(e.Reject(ctx, []*Issue{{Path: "prompt", Code: CodePlannerFailed, Message: "no planner is configured, so a prompt cannot be turned into a plan: send a \"plan\" instead, or configure a planner (the planner block of the configuration file)"}})), nil
			}
			return opts.Prompt(ctx, req, r), nil
		}
		return Result(e.Run(ctx, r)), nil
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

// Result turns an envelope into the tool's result: the envelope as
// structured content, and isError when the plan did not succeed. The text
// content is two blocks: the summary line for people and models, then
// exactly the JSON of the structured content, so that a client that parses
// a text block (or predates structured content) finds one that is pure JSON.
//
// The envelope is encoded once, for both: the structured content is that
// JSON as it is.
func Result(env *Envelope) *mcp.CallToolResult {
	data := env.JSON()
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: env.Summary()}, &mcp.TextContent{Text: string(data)}},
		StructuredContent: json.RawMessage(data),
		IsError:           !env.Artifact.Success && env.Artifact.Status != StatusAwaitingClient,
	}
}
