// Package toolloop is the one bounded tool loop of orchestra: a model is
// offered tools, the calls it makes are run and their results fed back,
// until it answers in text or runs out of turns.
//
// The planner's reactive fallback and every agent run it. The loop knows
// nothing about how a call is run: the caller's Call function does that
// (through the engine, under its limits), and tells the model what came
// of it. The loop runs under the budget its context carries (package
// budget): when the request has no tool call left, the next turn asks for
// the answer without tools.
//
// With Handoff set, a turn that asks for client-final tools runs its other
// calls, then pauses: Result.Paused is the loop's State (plain JSON, kept
// by the caller with its pause), and Resume goes on with the client's
// results, running no turn and no call twice. ClientHandoff is the
// Handoff of both callers: it checks each client call against its tool's
// input schema (Preflight); ClientResults records the client's results as
// steps of the run and turns them into tool messages.
//
//	res := (&toolloop.Loop{
//		Generate: model.Generate,
//		System:   "You are a researcher.",
//		Tools:    defs,
//		MaxTurns: 8,
//		Call: func(ctx context.Context, tc llm.ToolCall) string {
//			return runTheTool(ctx, tc)
//		},
//	}).Run(ctx, []llm.Message{{Role: llm.RoleUser, Content: "goal"}})
//	if res.Err != nil { ... res.Err.Code ... }
package toolloop
