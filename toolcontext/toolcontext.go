package toolcontext

import (
	"context"
	"encoding/json"
	"math"

	"github.com/google/uuid"

	"github.com/orchestra-mcp/orchestra/budget"
)

type (
	depthKey           struct{}
	plannerDisabledKey struct{}
	idsKey             struct{}
	traceparentKey     struct{}
)

// WithDepth returns a context that records how many orchestrations enclose
// the work done under it. A request from a client starts at depth 0; the tools
// a plan calls run at the plan's depth plus one.
func WithDepth(ctx context.Context, depth int) context.Context {
	return context.WithValue(ctx, depthKey{}, depth)
}

// Depth reports the orchestration depth recorded in ctx, or 0 if none is.
func Depth(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// WithPlannerDisabled returns a context in which planner tools (and the
// orchestrate tool itself) must not be offered or called. The planner sets it
// while it asks a model for a plan so that planning can never recurse.
func WithPlannerDisabled(ctx context.Context) context.Context {
	return context.WithValue(ctx, plannerDisabledKey{}, true)
}

// PlannerDisabled reports whether planner tools are disabled in ctx.
func PlannerDisabled(ctx context.Context) bool {
	v, _ := ctx.Value(plannerDisabledKey{}).(bool)
	return v
}

// IDs are the identifiers that tie work to the request that caused it.
type IDs struct {
	RequestID string `json:"request_id"`
	ContextID string `json:"context_id"`
	TraceID   string `json:"trace_id"`
	UserID    string `json:"user_id"`
	// Owner is whose records the work's are: the authenticated caller,
	// namespaced by how it authenticated ("static:alice",
	// "jwt:https://issuer#alice"); "" for the machine's own callers.
	Owner string `json:"-"`
	// Tenant is the caller's tenant, "" without tenants: records and
	// logs carry it, and reads are scoped by it.
	Tenant string `json:"tenant,omitempty"`
}

// WithIDs returns a context carrying ids.
func WithIDs(ctx context.Context, ids IDs) context.Context {
	return context.WithValue(ctx, idsKey{}, ids)
}

// IDsFrom returns the ids carried by ctx.
func IDsFrom(ctx context.Context) (IDs, bool) {
	ids, ok := ctx.Value(idsKey{}).(IDs)
	return ids, ok
}

// EnsureRequestID returns ctx with a request id: the one its IDs carry, or
// a new one, so that every log line and record of the request carries it.
func EnsureRequestID(ctx context.Context) context.Context {
	ids, _ := IDsFrom(ctx)
	if ids.RequestID != "" {
		return ctx
	}
	ids.RequestID = uuid.NewString()
	return WithIDs(ctx, ids)
}

// WithTraceparent returns a context carrying a W3C traceparent header value,
// to be passed on to downstream servers in the request _meta.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, tp)
}

// TraceparentFrom returns the W3C traceparent carried by ctx.
func TraceparentFrom(ctx context.Context) (string, bool) {
	tp, ok := ctx.Value(traceparentKey{}).(string)
	return tp, ok && tp != ""
}

// Keys of the MCP request _meta that carry orchestration context between
// processes, so that one orchestra behind another still knows its depth and
// trace.
const (
	// MetaDepth holds the orchestration depth (a JSON number) of the caller.
	MetaDepth = "io.github.orchestra-mcp/depth"
	// MetaTraceparent holds a W3C traceparent header value.
	MetaTraceparent = "traceparent"
	// MetaRequestID holds the caller's id of its request, which the run's
	// envelope and record echo.
	MetaRequestID = "io.github.orchestra-mcp/request_id"
	// MetaContextID holds the caller's id of its conversation or task.
	MetaContextID = "io.github.orchestra-mcp/context_id"
	// MetaUserID holds the user the request is made for (the caller's
	// authenticated user, never its credential).
	MetaUserID = "io.github.orchestra-mcp/user_id"
	// MetaTenant holds the caller's tenant.
	MetaTenant = "io.github.orchestra-mcp/tenant"
	// MetaExecID holds the exec id of the run that made the call: a plan's
	// run, or an agent's.
	MetaExecID = "io.github.orchestra-mcp/exec_id"
	// MetaStepID holds the id of the step that made the call within that
	// run: a plan step's id ("read", "each[2]" in a for_each), or a tool
	// loop's call ("call_0").
	MetaStepID = "io.github.orchestra-mcp/step_id"
)

// Call names where a tool call is made: the run and its step.
type Call struct {
	// ExecID is the exec id of the run the call is a step of.
	ExecID string
	// StepID is the step's id in that run.
	StepID string
	// Auto reports that a model orchestra runs chose the tool (the
	// planner, its reactive fallback, an agent's loop), not the caller.
	Auto bool
}

type callKey struct{}

// WithCall returns a context recording that the tool calls made under it
// are the step c.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the step the work done under ctx is a call of, if any.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}

// CallIDs returns the ids of the tool call made under ctx that are passed
// on to the tool, by name (request_id, context_id, user_id, tenant,
// exec_id, step_id): the request's ids and the step's. Empty ones are
// left out. They are the request _meta's keys under the prefix of
// MetaRequestID (MetaIDs), and the attributes of a failing call's log
// line. No credential is among them: the caller's owner key is not.
func CallIDs(ctx context.Context) []ID {
	ids, _ := IDsFrom(ctx)
	c, _ := CallFrom(ctx)
	all := []ID{
		{"request_id", ids.RequestID}, {"context_id", ids.ContextID}, {"user_id", ids.UserID},
		{"tenant", ids.Tenant}, {"exec_id", c.ExecID}, {"step_id", c.StepID},
	}
	out := all[:0]
	for _, id := range all {
		if id.Value != "" {
			out = append(out, id)
		}
	}
	return out
}

// ID is one named id of CallIDs.
type ID struct{ Name, Value string }

// MetaPrefix is the prefix of orchestra's keys in a request's _meta.
const MetaPrefix = "io.github.orchestra-mcp/"

// MetaIDs adds the CallIDs of ctx to meta, each under MetaPrefix
// (MetaRequestID, MetaContextID, MetaUserID, MetaTenant, MetaExecID,
// MetaStepID).
func MetaIDs(ctx context.Context, meta map[string]any) {
	for _, id := range CallIDs(ctx) {
		meta[MetaPrefix+id.Name] = id.Value
	}
}

// LogIDs returns the CallIDs of ctx as slog attributes.
func LogIDs(ctx context.Context) []any {
	ids := CallIDs(ctx)
	out := make([]any, 0, 2*len(ids))
	for _, id := range ids {
		out = append(out, id.Name, id.Value)
	}
	return out
}

// FromMeta returns ctx with the depth and traceparent that an incoming
// request's _meta carries (MetaDepth, MetaTraceparent). A depth lower than
// the one ctx already has is ignored: a caller can never reset it.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	if d, ok := metaInt(meta[MetaDepth]); ok && d > Depth(ctx) {
		ctx = WithDepth(ctx, d)
	}
	if tp, ok := meta[MetaTraceparent].(string); ok && tp != "" {
		ctx = WithTraceparent(ctx, tp)
	}
	return ctx
}

func metaInt(v any) (int, bool) {
	switch v := v.(type) {
	case float64:
		if v >= 0 && v <= math.MaxInt32 && v == math.Trunc(v) {
			return int(v), true
		}
	case json.Number:
		n, err := v.Int64()
		if err == nil && n >= 0 && n <= math.MaxInt32 {
			return int(n), true
		}
	case int:
		return v, v >= 0
	case int64:
		return int(v), v >= 0
	}
	return 0, false
}

// HTTP headers that carry the same context on requests a plan makes with
// http_request, so that a plan that calls an orchestra over HTTP (itself,
// or another that calls it back) still counts its depth.
const (
	// HeaderDepth holds the orchestration depth (a decimal number) of the
	// caller.
	HeaderDepth = "Orchestra-Depth"
	// HeaderTraceparent holds a W3C traceparent value.
	HeaderTraceparent = "Traceparent"
)

type execIDKey struct{}

// WithExecID returns a context recording that the work done under it is
// part of run execID: a run started under it (an agent's, or a nested
// orchestration) is that run's child.
func WithExecID(ctx context.Context, execID string) context.Context {
	return context.WithValue(ctx, execIDKey{}, execID)
}

// ExecID returns the exec id of the run that encloses ctx, if any.
func ExecID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(execIDKey{}).(string)
	return id, ok && id != ""
}

type budgetKey struct{}

// WithBudget returns a context carrying b, the node of the request's
// budget tree that the work done under it draws from (package budget).
// Like a deadline, it is a value of the request: every tool call, model
// call and nested run takes the context, so each draws from the node of
// the work that started it.
func WithBudget(ctx context.Context, b *budget.Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// BudgetFrom returns the budget node carried by ctx, if any.
func BudgetFrom(ctx context.Context) (*budget.Budget, bool) {
	b, ok := ctx.Value(budgetKey{}).(*budget.Budget)
	return b, ok && b != nil
}
