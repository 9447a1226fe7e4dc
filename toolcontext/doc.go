// Package toolcontext carries request-scoped values through a context: the
// orchestration depth, whether planner tools are disabled, the ids that
// tie logs, traces and records to one request, and the node of the
// request's budget tree (package budget) that work draws from.
//
// It carries values, never services. Each value has a WithX / XFrom pair:
//
//	ctx = toolcontext.WithDepth(ctx, 1)
//	depth := toolcontext.Depth(ctx) // 1
//
//	ctx = toolcontext.WithIDs(ctx, toolcontext.IDs{RequestID: "req-1"})
//	ids, _ := toolcontext.IDsFrom(ctx)
package toolcontext
