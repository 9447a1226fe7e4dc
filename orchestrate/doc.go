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
// The files follow the life of a run, one line each (a test keeps the list
// whole):
//
//	plan.go            the plan model: requests, steps, their fields and defaults
//	codes.go           every Code: of issues, failures, skips and answers, with its meaning
//	limits.go          the limits of one orchestration, which a request may only lower
//	context.go         what a caller tells the planner besides the goal
//	instructions.go    the layers of instructions: the operator's, the tenant's, the request's
//	decode.go          the one decoding gate of a request: aliases, defaults, issues
//	decode_step.go     the decoding of a step, its retry and an agent step
//	decode_loop.go     the decoding of for_each loops and when conditions
//	decode_pause.go    the decoding of client_tools and resume
//	template.go        templates: their resolution against bindings and outputs
//	template_parse.go  templates: the grammar and its parser
//	validate.go        plan-time validation against the tools' schemas
//	validate_args.go   the checks of arguments holding templates
//	validate_flow.go   the checks of loops, conditions and the tool calls they make
//	answer.go          a plan's answer and return: checked at plan time, rendered after
//	params.go          a plan kept as a workflow: bindings typed by parameters, their uses, save_as
//	engine.go          the engine, its options and what it starts a run with
//	hooks.go           the lifecycle hooks that observe runs
//	budget.go          the run's node of the budget tree, bytes held, admission
//	clienttools.go     a catalog with the tools a request declares added
//	scope.go           a catalog narrowed to the tools a caller may call
//	run.go             one run: validation, then scheduling, then the envelope
//	schedule.go        the top-level steps, sequential or as a dag
//	step.go            a tool step with its retries
//	plain.go           outputs as plain JSON values before conditions and templates read them
//	group.go           a parallel group and its merge
//	handoff.go         a tool loop's handoff of client calls: its pause, the client side a step sees, child runs taken up
//	loop.go            for_each loops, their iterations and the limits they meet
//	when.go            when conditions
//	stream.go          steps started while the planner still writes the plan
//	child.go           a run whose steps come from an agent's loop, recorded like any other
//	pause.go           pausing on a tool only the client can run
//	pause_group.go     the waits of a group's children and the records kept over a resume
//	pause_schedule.go  the scheduler's side of a pause and a resume
//	pause_store.go     checkpoints: what a paused or interrupted run needs to go on
//	resume.go          resuming a run under its exec id, without running ended steps again
//	background.go      background runs: await and cancel decoded, the running envelope
//	record.go          the records of steps and the one place a step ends
//	redact.go          secrets cut out of errors and issues
//	truncate.go        output caps
//	usage.go           what a run's agent steps used, summed in the envelope
//	envelope.go        the response, made from a snapshot of the finished run
//	compact.go         what a caller gets back of the envelope, by detail and protocol
//	tool.go            the agent_orchestrate MCP tool
//	doc.go             this map
package orchestrate
