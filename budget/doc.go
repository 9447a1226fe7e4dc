// Package budget is the budget tree of a request: how much the work a
// request causes may still spend — tool calls, model calls, agent runs,
// bytes held and wall time — and which tools it may call.
//
// A request gets a root; everything it starts draws from it through a
// child: a run, an agent's run, a nested plan, the reactive fallback. A
// child's spending counts against every node above it, and a child's
// deadline and tools can only be narrower than its parent's, so nesting
// divides a budget and never multiplies it. The server's own node (its
// memory) sits above every request.
//
//	server := budget.New("the server", budget.Grant{Bytes: budget.Cap{Max: 1 << 30, Key: "limits.max_memory_bytes"}})
//	req := server.Child("the request", budget.Grant{
//		ToolCalls: budget.Cap{Max: 100, Key: "limits.max_tool_calls"},
//		Deadline:  time.Now().Add(5 * time.Minute),
//	})
//	agent := req.Child("agent researcher", budget.Grant{Tools: func(name string) bool { return name == "search" }})
//	if err := agent.Spend(budget.ToolCalls, 1); err != nil {
//		var ex *budget.Exceeded
//		errors.As(err, &ex) // which node, which cap
//	}
//	agent.Allows("delete_everything") // false: the agent's grant does not name it
//
// The tree travels with the request in its context (toolcontext.WithBudget),
// like the context's deadline, which is itself a budget: every tool call,
// model call and nested run already takes the context, so no path can
// forget to pass the budget on. A Budget is a value of the request, never
// a service: it counts and answers, and holds nothing else.
package budget
