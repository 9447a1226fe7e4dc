// Package agents runs configured agents: a model with instructions and a
// set of allowed tools, run as a bounded tool loop (package toolloop).
//
// Every agent is the catalog tool agent__<name>, so that plans call it
// like any tool (the "agent" step is a tool step of it) and the planner
// can delegate to it. It speaks the AgentHost contract: its input is an
// [ExecutionRequest] and its structured output an [ExecutionResponse],
// whose outputSchema is published with the agent's own output_schema as
// result.data, so that a plan's template into result.data is checked
// before anything runs. The request says who chose the agent
// (routing_mode, auto whenever orchestra's planner, its fallback or another
// agent did) and may name it (selected_agent, which must be this agent); the
// response's metadata echoes the routing, names the tools the agent called
// and the version of its configuration ([ConfigVersion]).
//
// Each call is a child execution of the run that made it (its records
// name that run as their parent): its model calls and tool calls are its
// steps. The loop runs only with the agent's allowed tools, within the
// caller's deadline and the agent's max_tool_steps; it never panics into
// the plan, and a loop that fails answers with status "error" and a code.
// An agent that got some data but not all (a failed tool call, or stopped
// by max_tool_steps or its deadline after tool results) answers "partial":
// the tool result is Partial, and a plan ends its step partial and goes on.
//
// A model turn that asks for client-final tools (the calling request's
// client tools, tools the configuration marks client-final, ask_user when
// the client has no elicitation) hands them to the client (handoff.go):
// the turn's other calls run, each client call is checked against its
// tool's input schema, and the agent answers with a registry.Handoff that
// pauses the calling run (awaiting_client) with the loop's state; its
// resume brings the client's results and the loop goes on, under the same
// child run, without repeating a model turn or a tool call. Called
// directly, the agent pauses its own run and answers awaiting_client.
// ask_user asks through the caller's elicitation when its client has it
// (Options.Elicit for a direct call, the run's own in a plan step).
//
// An agent's run is a node of its caller's budget tree (package budget):
// its start, its model calls and its tool calls count against the
// request's max_agent_runs, max_model_calls and max_tool_calls, however
// deeply agents call agents. It is a principal: it may call its own
// tools, within the request's, and a plan it starts through
// agent_orchestrate can call only those.
//
//	tools, err := agents.Tools(cfg.Agents, agents.Options{Engine: engine, Catalog: catalog, Model: plannerModel})
//	catalog.Add(tools...)
package agents
