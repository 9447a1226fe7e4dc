package orchestrate

// Code is a stable, machine-readable reason: of a plan-time issue, of a
// step's or a run's failure, of a skip, or of an agent's answer. Every
// code orchestra reports is declared in this file, with what it means;
// the README's table of codes is made from these declarations.
type Code string

// Plan-time issues: the input or its plan cannot run as written, and
// nothing ran (validation_errors).
const (
	// CodeInvalidJSON: the input is not valid JSON (or not UTF-8).
	CodeInvalidJSON Code = "invalid_json"
	// CodeInvalidRequest: the input is not a request orchestra can take:
	// not an object, neither a plan nor a prompt, or a resume without its
	// exec_id.
	CodeInvalidRequest Code = "invalid_request"
	// CodeUnknownField: the input has a field orchestra does not know; the
	// message names the closest known one.
	CodeUnknownField Code = "unknown_field"
	// CodeInvalidValue: a field has a value of the wrong type or out of
	// range.
	CodeInvalidValue Code = "invalid_value"
	// CodeMissingField: a step lacks what it needs (a tool, the children of
	// a parallel group).
	CodeMissingField Code = "missing_field"
	// CodeEmptyPlan: the plan, or a parallel group, has no steps.
	CodeEmptyPlan Code = "empty_plan"
	// CodeUnknownTool: a step names a tool the catalog (or the caller's
	// tenant) does not have.
	CodeUnknownTool Code = "unknown_tool"
	// CodeForbiddenTool: a step names a tool a plan may not call, such as
	// agent_orchestrate on its own server, or one an agent is not allowed.
	CodeForbiddenTool Code = "forbidden_tool"
	// CodeInvalidArguments: a step's arguments do not match its tool's
	// input schema.
	CodeInvalidArguments Code = "invalid_arguments"
	// CodeBadTemplate: a template does not parse.
	CodeBadTemplate Code = "bad_template"
	// CodeUnknownRef: a template refers to a step the plan does not have.
	CodeUnknownRef Code = "unknown_ref"
	// CodeSelfRef: a template refers to its own step, or to the group the
	// step is in.
	CodeSelfRef Code = "self_ref"
	// CodeForwardRef: a template refers to a step that runs later.
	CodeForwardRef Code = "forward_ref"
	// CodeSiblingRef: a template refers to a step of the same parallel
	// group, which runs at the same time.
	CodeSiblingRef Code = "sibling_ref"
	// CodeUnknownBinding: a template refers to a binding the request does
	// not have.
	CodeUnknownBinding Code = "unknown_binding"
	// CodeFieldNotFound: a template reads a field the value it refers to
	// does not have.
	CodeFieldNotFound Code = "field_not_found"
	// CodeTypeMismatch: a template's value has a type the argument it fills
	// does not accept.
	CodeTypeMismatch Code = "type_mismatch"
	// CodeDuplicateID: two steps, result keys or loop variables share a
	// name.
	CodeDuplicateID Code = "duplicate_id"
	// CodeInvalidID: a step id cannot be used in templates, or is
	// reserved.
	CodeInvalidID Code = "invalid_id"
	// CodeTooManySteps: the plan has more tool steps than limits.max_steps.
	CodeTooManySteps Code = "too_many_steps"
	// CodeTooDeep: parallel groups nest deeper than limits.max_nesting.
	CodeTooDeep Code = "too_deep"
	// CodeTooLarge: the request, or a step's resolved arguments, is larger
	// than its limit.
	CodeTooLarge Code = "too_large"
	// CodeNotAnArray: a loop's for_each is not an array.
	CodeNotAnArray Code = "not_an_array"
	// CodeInsideLoop: a template refers to a step inside a loop's body,
	// which runs once per element, from outside the loop.
	CodeInsideLoop Code = "inside_loop"
	// CodeLimitExceeded: a loop would run more iterations than
	// limits.max_iterations, or the run make more tool calls than
	// limits.max_tool_calls: found before the plan runs where it can be,
	// else while it runs, and then nothing new starts.
	CodeLimitExceeded Code = "limit_exceeded"
	// CodeBareReference: a reference inside longer text is written
	// without the ${...} it needs there, so it would be passed on as text.
	CodeBareReference Code = "bare_reference"
	// CodeTooManyIssues: the list of issues was cut at its limit (100,
	// MaxIssues); this last one counts the rest.
	CodeTooManyIssues Code = "too_many_issues"
)

// Warnings: the plan runs, but a part of it may not do what was meant
// (warnings).
const (
	// CodeUncheckedRef: a template's reference cannot be checked before
	// the plan runs; a missing field fails the step then.
	CodeUncheckedRef Code = "unchecked_reference"
	// CodeNotATemplate: an argument looks like a reference to a step but
	// is passed as plain text.
	CodeNotATemplate Code = "not_a_template"
	// CodeSchemaProblem: a tool's schemas could not be used; its arguments
	// are checked only by the tool.
	CodeSchemaProblem Code = "schema_unusable"
	// CodeMustache: an argument holds a Mustache placeholder, which
	// nothing fills.
	CodeMustache Code = "mustache_placeholder"
	// CodeConditional: a step needs a step that runs only when its
	// condition holds, and is skipped with it otherwise.
	CodeConditional Code = "conditional_reference"
	// CodeWorkflowNotSaved: the run's save_as could not be honoured (the
	// run did not succeed, the name is a configured workflow's, or the plan
	// does not fit);
	// the run's own result stands.
	CodeWorkflowNotSaved Code = "workflow_not_saved"
)

// Failures: why a step or a run failed (a step's error, the run's
// errors).
const (
	// CodeToolError: the tool failed, or one of a loop's iterations did.
	CodeToolError Code = "tool_error"
	// CodeTimeout: a step's tool did not answer within its timeout, the
	// plan did not finish within its own, or an agent ran out of time.
	CodeTimeout Code = "timeout"
	// CodeDeadlineExceeded: the plan's timeout passed while the step ran.
	CodeDeadlineExceeded Code = "deadline_exceeded"
	// CodeCancelled: the caller cancelled the run, or the server stopped
	// it, before the step finished.
	CodeCancelled Code = "cancelled"
	// CodePanic: an internal error; the run recovered from a panic.
	CodePanic Code = "panic"
	// CodeValidation: the run did not start because its plan has
	// validation errors.
	CodeValidation Code = "validation"
	// CodeDepthExceeded: orchestrations calling each other nest deeper
	// than limits.max_depth.
	CodeDepthExceeded Code = "depth_exceeded"
	// CodeServerUnavailable: the tool's downstream server is gone or not
	// ready.
	CodeServerUnavailable Code = "server_unavailable"
	// CodeTemplateError: a step's templates did not resolve when it ran.
	CodeTemplateError Code = "template_error"
	// CodeDependencyFailed: the step did not run because a step whose
	// output it needs did not succeed.
	CodeDependencyFailed Code = "dependency_failed"
	// CodeHalted: a step or group failed and the plan halted (on_error
	// halt); the remaining steps were skipped.
	CodeHalted Code = "halted"
	// CodeBusy: the server (or the caller's tenant) is at its limit of
	// plans or memory; retry in a moment.
	CodeBusy Code = "busy"
	// CodeQueueFull: a background run would pass limits.max_background
	// (the caller's, or its tenant's) or limits.background_queue_depth
	// (the server's); retry once one ends, after retry_after_ms.
	CodeQueueFull Code = "queue_full"
	// CodePlannerFailed: no plan could be made from the prompt (no planner
	// configured, or the planner's attempts failed).
	CodePlannerFailed Code = "planner_failed"
	// CodePlanningDisabled: the caller's tenant may not send prompts
	// (planning_enabled: false).
	CodePlanningDisabled Code = "planning_disabled"
)

// Skips: why a step did not run although nothing failed.
const (
	// CodeConditionFalse: the step's when condition does not hold.
	CodeConditionFalse Code = "condition_false"
	// CodeStreamRejected: the step started while the plan was being
	// written, then the plan failed validation (or planning failed): the
	// step was cancelled.
	CodeStreamRejected Code = "started_early_rejected"
	// CodeStreamUnused: the step started while the plan was being written,
	// but the plan that ran did not use its call.
	CodeStreamUnused Code = "started_early_unused"
)

// Pausing and resuming: why a client's call, or a resume, did not go on.
const (
	// CodeDeclined: the user declined or cancelled an ask_user question.
	CodeDeclined Code = "declined"
	// CodeUserUnavailable: no user can be asked an ask_user question (the
	// client has no elicitation), and the question does not let the
	// calling model answer instead (if_no_user: pause).
	CodeUserUnavailable Code = "user_unavailable"
	// CodeClientError: the client reported that its tool failed.
	CodeClientError Code = "client_error"
	// CodePauseExpired: the run waited longer than limits.pause_ttl.
	CodePauseExpired Code = "pause_expired"
	// CodeUnknownRun: a resume, an await or a cancel names a run that does
	// not exist (or that the caller may not see).
	CodeUnknownRun Code = "unknown_run"
	// CodeNotResumable: the run is not paused, interrupted, failed or
	// cancelled.
	CodeNotResumable Code = "not_resumable"
	// CodeAlreadyResumed: another resume took the run first.
	CodeAlreadyResumed Code = "already_resumed"
	// CodeInvalidResult: a client's result does not match its tool's
	// output schema, or names no pending call.
	CodeInvalidResult Code = "invalid_result"
	// CodeClientInLoop: a for_each iteration, or a tool loop run inside
	// another tool loop, cannot pause for the client.
	CodeClientInLoop Code = "client_in_loop"
)

// Idempotent calls: why a call with an idempotency key did not run.
const (
	// CodeIdempotencyConflict: the caller used the key before with a
	// different input; nothing ran.
	CodeIdempotencyConflict Code = "idempotency_conflict"
	// CodeIdempotencyInProgress: the first call with the key is still
	// running and did not end within this call's timeout; the envelope
	// names its run (status running).
	CodeIdempotencyInProgress Code = "idempotency_in_progress"
	// CodeIdempotencyUnavailable: the store could not check the key;
	// nothing ran.
	CodeIdempotencyUnavailable Code = "idempotency_unavailable"
)

// Agents: why an agent did not answer in full (its error.code, and its
// step's).
const (
	// CodeModelError: the model call failed, or the agent has no model.
	CodeModelError Code = "model_error"
	// CodeMaxToolSteps: the model still called tools when its turns
	// (max_tool_steps) were spent, and gave no answer.
	CodeMaxToolSteps Code = "max_tool_steps"
	// CodeInvalidOutput: the agent's answer does not match its
	// output_schema, even after a repair.
	CodeInvalidOutput Code = "invalid_output"
	// CodeInvalidInput: the agent's call does not match its input.
	CodeInvalidInput Code = "invalid_input"
)
