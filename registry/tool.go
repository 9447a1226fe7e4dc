package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Mode says who finishes a tool's work: the server, or the client that
// called the plan (one interface for every tool, whoever runs it).
type Mode int

const (
	// ServerFinal tools are executed completely by orchestra.
	ServerFinal Mode = iota
	// ClientFinal tools are validated and shaped by orchestra, but a client
	// must perform the final behaviour.
	ClientFinal
)

func (m Mode) String() string {
	if m == ClientFinal {
		return "client-final"
	}
	return "server-final"
}

// CallFunc runs a tool.
//
// A nil error with a Result whose IsError is set is a tool failure the model
// can act on. A non-nil error is a failure to reach or run the tool; wrap it
// with Transient when retrying may help.
type CallFunc func(ctx context.Context, req *CallRequest) (*Result, error)

// CallRequest is one call of a tool.
type CallRequest struct {
	// Arguments are the tool's decoded JSON arguments, templates resolved.
	Arguments map[string]any
	// Progress, when not nil, receives progress the tool reports while it runs.
	Progress func(Progress)
	// Continue, when set, takes up the call's earlier handoff (see
	// [Handoff]) with the client's results, instead of starting anew.
	Continue *Continuation
}

// Handoff is the answer of a tool that runs a loop (an agent) whose model
// asked for client-final tools: the calls the client must run, and the
// loop's state, which the caller keeps with its pause and hands back in
// [CallRequest].Continue with the client's results.
type Handoff struct {
	// Calls are the client's calls, their arguments checked against the
	// client tools' input schemas.
	Calls []HandoffCall
	// State is the paused loop, as JSON.
	State json.RawMessage
}

// Tools returns the tool of each call, in order.
func (h *Handoff) Tools() []string {
	tools := make([]string, len(h.Calls))
	for i, c := range h.Calls {
		tools[i] = c.Tool
	}
	return tools
}

// HandoffCall is one call a [Handoff] leaves to the client.
type HandoffCall struct {
	// ID names the call within its loop.
	ID        string
	Tool      string
	Arguments map[string]any
}

// Continuation takes up a [Handoff]: its state and the client's results,
// by [HandoffCall].ID ({"error": "message"} for a call that failed).
type Continuation struct {
	State   json.RawMessage
	Results map[string]any
}

// Progress is one progress report of a running tool.
type Progress struct {
	Progress float64
	Total    float64 // 0 when unknown
	Message  string
}

// Tool is everything a plan can call.
type Tool struct {
	// Name is the catalog name, unique in a catalog. It matches NamePattern.
	Name string
	// Title is an optional human-readable name.
	Title string
	// Description tells a model when and how to use the tool.
	Description string
	// InputSchema is the JSON Schema of the arguments; it is always an object schema.
	InputSchema *jsonschema.Schema
	// OutputSchema, when set, describes the tool's structured output. Plans
	// referencing fields of a tool without one are checked only at run time.
	OutputSchema *jsonschema.Schema
	// Annotations are the MCP hints (read-only, destructive, ...).
	Annotations *mcp.ToolAnnotations
	// Mode says whether the server finishes the tool's work.
	Mode Mode
	// Source names where the tool comes from: "builtin" or a server name.
	Source string
	// SchemaProblem explains why the tool's schemas could not be used for
	// plan-time validation, when they could not. The tool stays callable.
	SchemaProblem string
	// Call runs the tool. Use Invoke rather than calling it directly.
	Call CallFunc
}

// NamePattern is what a catalog name must match: names that model APIs accept
// as function names.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Result is what a tool returned.
type Result struct {
	// Structured is the tool's structured content (MCP structuredContent).
	Structured any
	// Content is the tool's content blocks: text, images, audio, resources.
	Content []mcp.Content
	// IsError reports a tool failure. Its message is in Content.
	IsError bool
	// Code, when set on a failure, is a stable code for it (an agent's
	// max_tool_steps, say) that a plan reports instead of tool_error.
	Code string
	// Partial reports an answer that is not complete (an agent's status
	// partial): its output is kept, and Code says what is missing. A plan
	// ends such a step partial, not failed.
	Partial bool
	// Handoff, when set, says the tool waits for its caller's client:
	// the result is not an answer yet (see [Handoff]).
	Handoff *Handoff
}

// Output is the value a plan sees as the step's output: the structured
// content, or {"text": "..."} with the text content when there is none.
func (r *Result) Output() any {
	if r == nil {
		return nil
	}
	if r.Structured != nil {
		return r.Structured
	}
	return map[string]any{"text": r.Text()}
}

// Text joins the text content blocks of r.
func (r *Result) Text() string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TextResult returns a result with one text block.
func TextResult(text string) *Result {
	return &Result{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// ErrorResult returns a tool-failure result whose message is msg.
func ErrorResult(msg string) *Result {
	r := TextResult(msg)
	r.IsError = true
	return r
}

// PanicError is the error Invoke returns when a tool panicked.
type PanicError struct {
	Tool  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %s panicked: %v", e.Tool, e.Value)
}

// Invoke calls t with args and never panics: a panic in the tool becomes a
// *PanicError. A tool with no Call function is an error.
func (t Tool) Invoke(ctx context.Context, req *CallRequest) (res *Result, err error) {
	if t.Call == nil {
		return nil, fmt.Errorf("tool %s has no implementation", t.Name)
	}
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, &PanicError{Tool: t.Name, Value: v, Stack: debug.Stack()}
		}
	}()
	if req == nil {
		req = &CallRequest{}
	}
	res, err = t.Call(ctx, req)
	if err == nil && res == nil {
		res = &Result{}
	}
	return res, err
}

// transientError marks an error as worth retrying.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// Transient marks err as a transient failure (a transport error, a
// connection reset) that a retry may fix.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

// IsTransient reports whether err is worth retrying: it was marked with
// Transient, or it is a deadline.
func IsTransient(err error) bool {
	var t transientError
	return errors.As(err, &t) || errors.Is(err, context.DeadlineExceeded)
}

// ErrServerUnavailable is returned (wrapped) by tools whose server cannot be
// reached. Plans report it with the code server_unavailable.
var ErrServerUnavailable = errors.New("server unavailable")
