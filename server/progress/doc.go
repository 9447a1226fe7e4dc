// Package progress sends the MCP progress notifications of one
// agent_orchestrate request whose caller sent a progress token: a
// notification when each step starts and when it ends, at any depth, with
// the share of tool steps done, never going backwards.
//
//	if n := progress.For(ctx, req); n != nil {
//		opts.Hooks = n.Hooks()
//	}
package progress
