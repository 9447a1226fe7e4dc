// Package workflows keeps plans under a name and calls them again with no
// model at all.
//
// A workflow is a name, a description, parameters (a JSON Schema whose
// properties are the plan's bindings), a plan and a version. Workflows come
// from the workflows block of the configuration ([Config]) or from the
// execution store, where a run's plan is saved with its bindings, and its
// literal tool arguments, turned into parameters ([Infer]). Each is the
// catalog tool workflow__<name> ([Tool]): its inputSchema is the
// parameters, its outputSchema is derived from the plan's return, and a
// call runs the plan with the arguments as its bindings — no planner, no
// model call. Plans, agents and the planner call it like any tool; the run
// it makes draws from its caller's budget tree and depth, so every limit
// applies to the steps inside.
//
// A workflow is checked against the catalog as it is now ([Workflow.Check])
// when it is saved, when the server starts and before every call: a tool
// that changed shape fails the call before anything runs, with an error
// that names the workflow, its version, the step and the field.
//
//	w, err := workflows.FromConfig("list_docs", cfg.Workflows["list_docs"])
//	if err := w.Check(engine); err != nil { ... }
//	catalog.Add(workflows.Tool(name, workflows.ToolOptions{Engine: engine, Resolve: resolve}))
package workflows
