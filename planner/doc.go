// Package planner turns a natural-language goal into a validated plan with
// one model call, runs it, and writes the answer with one more: PLAN →
// EXECUTE → RESPOND, two model calls however many tools run.
//
// The model is offered a single tool, __planning__ ([ToolName]), whose
// schema is generated from the catalog ([Build]): a direct_response with
// the answer, or tool_calls whose tool_name is one of the catalog's tools
// (never agent_orchestrate) with that tool's arguments. A strict variant
// fits the providers' strict structured-output modes when the catalog's
// schemas allow it; otherwise the non-strict one is offered. The system
// prompt lists each tool's description and output fields, so the model can
// pass data between calls with $N.output.field templates. The tool is
// generated again whenever the catalog's version changes.
//
// [Planner.Plan] decodes the answer (the tool call's arguments, or JSON in
// the text) and validates it exactly like a plan a client sent. An invalid
// answer is sent back with its errors (attempts default to 2); then
// planning fails with the last answer and its errors. Planning runs with
// planner tools disabled in the context, so it can never recurse, and
// within the plan's deadline.
//
// [Planner.Run] runs the prompt path of agent_orchestrate through the
// engine's state machine (planner_active → plan_validated → ...); with
// "fallback": "reactive" a failed planning falls back to a bounded tool loop
// with the same model (the reactive fallback). [Planner.Ask] adds the
// RESPOND call.
//
//	p := planner.New(planner.Options{Catalog: catalog, Engine: engine, Model: model})
//	env, err := p.Ask(ctx, &orchestrate.Request{Prompt: "Summarize the open issues"})
//	if err != nil {
//		return err // only llm.ErrInputRequired: the client must answer first
//	}
//	fmt.Println(env.Artifact.Response, env.Artifact.Planner.ModelCalls) // the answer, 2
package planner
