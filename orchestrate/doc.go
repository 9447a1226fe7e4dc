// Package orchestrate is orchestra's plan engine: the plan model, the
// template language, plan-time validation, the executor and the result
// envelope, and the MCP tool agent_orchestrate that puts them together.
//
// An [Engine] validates a plan against the tools' schemas and runs it;
// [Hooks] observe its runs:
//
//	e := orchestrate.NewEngine(orchestrate.Options{
//		Tools: catalog,
//		Hooks: &orchestrate.Hooks{StepEnded: func(i orchestrate.StepEndedInfo) {
//			log.Printf("step %s: %s", i.Step.ID, i.Step.Status)
//		}},
//	})
//	req, issues := orchestrate.DecodeRequest(data)
//	if len(issues) > 0 {
//		return issues
//	}
//	env := e.Run(ctx, req) // always an envelope; env.Artifact.Status says how it went
//
// Every run is a node of its request's budget tree (package budget),
// carried in its context: the run of a request, an agent's calls and the
// plans it starts all draw from the one root [Engine.Budgeted] makes, and
// can call only what their caller could.
//
// The files follow the life of a run:
//
//	plan.go, decode.go     the plan model and its decoding (aliases, defaults)
//	template.go            templates: the grammar (template_parse.go) and resolution
//	validate.go            plan-time validation (validate_args.go: arguments holding templates)
//	engine.go, hooks.go    the engine, its options and its lifecycle hooks
//	run.go                 one run: validation, then scheduling, then the envelope
//	schedule.go            the top-level steps, sequential or as a dag
//	step.go, group.go      a tool step with its retries; a parallel group and its merge
//	loop.go, when.go       for_each loops and their iterations; when conditions
//	                       (decode_loop.go, validate_flow.go: their decoding and checks)
//	record.go              the records of steps and the one place a step ends
//	envelope.go            the response, made from a snapshot of the finished run
//	budget.go              the run's node of the budget tree, bytes held, admission
//	truncate.go            output caps
//	tool.go                the agent_orchestrate MCP tool
package orchestrate
