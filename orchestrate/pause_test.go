package orchestrate

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
)

// pauseCatalog has server tools read and verify, which log their calls.
func pauseCatalog(t *testing.T, log *callLog) *registry.Catalog {
	read := fakeTool(t, "read", `{"type":"object","properties":{"path":{"type":"string"}}}`,
		`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
		func(_ context.Context, args map[string]any) (*registry.Result, error) {
			log.add("read", args)
			return structured(map[string]any{"text": "hello from " + args["path"].(string)}), nil
		})
	verify := fakeTool(t, "verify", `{"type":"object","properties":{"diff":{"type":"string"}}}`,
		`{"type":"object","properties":{"ok":{"type":"boolean"}}}`,
		func(_ context.Context, args map[string]any) (*registry.Result, error) {
			log.add("verify", args)
			return structured(map[string]any{"ok": args["diff"] == "+world"}), nil
		})
	return registry.NewCatalog(read, verify, builtin.AskUser())
}

const editTool = `{"name": "edit", "description": "Edits a file in the IDE.",
	"input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path", "text"]},
	"output_schema": {"type": "object", "properties": {"diff": {"type": "string"}}, "required": ["diff"]}}`

const readEditVerify = `{"client_tools": [` + editTool + `], "plan": {"steps": [
	{"id": "read", "tool": "read", "arguments": {"path": "$bindings.file"}},
	{"id": "edit", "tool": "edit", "arguments": {"path": "$bindings.file", "text": "${read.output.text}!"}},
	{"id": "verify", "tool": "verify", "arguments": {"diff": "$edit.output.diff"}}
]}, "bindings": {"file": "a.txt"}}`

func resumeReq(t *testing.T, execID string, results string) *Request {
	t.Helper()
	return mustRequest(t, `{"resume": {"exec_id": "`+execID+`", "results": `+results+`}}`)
}

// A plan pauses at a client tool with its arguments resolved, and a resume
// with the client's result finishes it; no server step runs twice.
func TestPauseAtClientToolAndResume(t *testing.T) {
	log := &callLog{}
	e := newTestEngine(t, pauseCatalog(t, log), Limits{})
	var mu sync.Mutex
	var lifecycle []string
	e.hooks = ComposeHooks(e.hooks, &Hooks{
		RunPaused: func(i RunPausedInfo) {
			mu.Lock()
			lifecycle = append(lifecycle, "paused "+i.Envelope.Artifact.Status)
			mu.Unlock()
		},
		RunResumed: func(RunResumedInfo) { mu.Lock(); lifecycle = append(lifecycle, "resumed"); mu.Unlock() },
		RunFinished: func(RunFinishedInfo) {
			mu.Lock()
			lifecycle = append(lifecycle, "finished")
			mu.Unlock()
		},
	})
	env := e.Run(t.Context(), mustRequest(t, readEditVerify))
	a := env.Artifact
	if a.Status != StatusAwaitingClient || a.Success {
		t.Fatalf("status %s, success %v; want awaiting_client: %s", a.Status, a.Success, env.JSON())
	}
	if res := Result(env); res.IsError {
		t.Error("a paused run's result is an error")
	}
	want := []*PendingCall{{CallID: a.Pending[0].CallID, Step: "edit", Tool: "edit", Arguments: map[string]any{"path": "a.txt", "text": "hello from a.txt!"}}}
	if diff := cmp.Diff(want, a.Pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if a.Resume == nil || a.Resume.ExecID != env.Metadata.ExecID {
		t.Fatalf("resume = %+v, want the run's exec id %s", a.Resume, env.Metadata.ExecID)
	}
	if got := []string{a.Steps[0].Status, a.Steps[1].Status, a.Steps[2].Status}; !cmp.Equal(got, []string{StatusSuccess, StatusAwaitingClient, StatusPending}) {
		t.Errorf("step statuses %v", got)
	}
	if !strings.Contains(env.Summary(), "waits for the client to run edit (edit)") {
		t.Errorf("summary %q", env.Summary())
	}

	env2 := e.Run(t.Context(), resumeReq(t, a.Resume.ExecID, `{"edit": {"diff": "+world"}}`))
	if !env2.Artifact.Success {
		t.Fatalf("resumed run: %s", env2.JSON())
	}
	if env2.Metadata.ExecID != env.Metadata.ExecID {
		t.Errorf("the resumed run has exec id %s, want %s", env2.Metadata.ExecID, env.Metadata.ExecID)
	}
	if got := env2.Artifact.Steps[2].Output; !cmp.Equal(got, map[string]any{"ok": true}) {
		t.Errorf("verify output %v", got)
	}
	if got := log.names(); !cmp.Equal(got, []string{"read", "verify"}) {
		t.Errorf("server tools called %v; want read and verify once each", got)
	}
	if got := env2.Artifact.Steps[1].Output; !cmp.Equal(got, map[string]any{"diff": "+world"}) {
		t.Errorf("edit output %v", got)
	}
	wantPath := []string{
		"validated: plan_init -> plan_validated", "dispatch: plan_validated -> dispatching_step",
		"steps_dispatched: dispatching_step -> awaiting_results", "step_succeeded: awaiting_results -> dispatching_step",
		"steps_dispatched: dispatching_step -> awaiting_results", "client_call: awaiting_results -> dispatching_step",
		"pause: dispatching_step -> awaiting_client",
		"resume: awaiting_client -> dispatching_step",
		"steps_dispatched: dispatching_step -> awaiting_results", "step_succeeded: awaiting_results -> dispatching_step",
		"steps_dispatched: dispatching_step -> awaiting_results", "step_succeeded: awaiting_results -> dispatching_step",
		"finished: dispatching_step -> completed",
	}
	if diff := cmp.Diff(wantPath, e.rec.path()); diff != "" {
		t.Errorf("state machine path (-want +got):\n%s", diff)
	}
	e.logs.checkFSM(t)
	mu.Lock()
	if diff := cmp.Diff([]string{"paused awaiting_client", "resumed", "finished"}, lifecycle); diff != "" {
		t.Errorf("pause hooks (-want +got):\n%s", diff)
	}
	mu.Unlock()

	// The same resume again runs nothing.
	env3 := e.Run(t.Context(), resumeReq(t, a.Resume.ExecID, `{"edit": {"diff": "+world"}}`))
	if env3.Artifact.Success || len(env3.Artifact.ValidationErrors) != 1 || env3.Artifact.ValidationErrors[0].Code != CodeNotResumable {
		t.Errorf("a second resume: %s", env3.JSON())
	}
	if got := log.names(); len(got) != 2 {
		t.Errorf("a second resume called %v", got)
	}
}

// A parallel group yields all its client calls at once, after its server
// steps ran; a resume may answer them by call id.
func TestParallelClientCalls(t *testing.T) {
	log := &callLog{}
	e := newTestEngine(t, pauseCatalog(t, log), Limits{})
	req := `{"client_tools": [` + editTool + `, {"name": "approve"}], "plan": {"steps": [
		{"id": "g", "parallel": [
			{"id": "e1", "tool": "edit", "arguments": {"path": "a", "text": "x"}},
			{"id": "r", "tool": "read", "arguments": {"path": "b"}},
			{"id": "ok", "tool": "approve", "arguments": {"what": "$bindings.what"}}
		]},
		{"id": "v", "tool": "verify", "arguments": {"diff": "$e1.output.diff"}}
	]}, "bindings": {"what": "deploy"}}`
	env := e.Run(t.Context(), mustRequest(t, req))
	a := env.Artifact
	if a.Status != StatusAwaitingClient || len(a.Pending) != 2 {
		t.Fatalf("want two pending calls: %s", env.JSON())
	}
	if a.Pending[0].Step != "e1" || a.Pending[1].Step != "ok" || a.Pending[1].Arguments["what"] != "deploy" {
		t.Errorf("pending %+v %+v", a.Pending[0], a.Pending[1])
	}
	if got := log.names(); !cmp.Equal(got, []string{"read"}) {
		t.Errorf("before the pause, called %v", got)
	}
	if a.Steps[0].Status != StatusAwaitingClient {
		t.Errorf("group status %s", a.Steps[0].Status)
	}
	results := `{"e1": {"diff": "+world"}, "` + a.Pending[1].CallID + `": {"approved": true}}`
	env2 := e.Run(t.Context(), resumeReq(t, a.Resume.ExecID, results))
	if !env2.Artifact.Success {
		t.Fatalf("resumed: %s", env2.JSON())
	}
	if got := env2.Artifact.Steps[0].Output.(map[string]any)["ok"]; !cmp.Equal(got, map[string]any{"approved": true}) {
		t.Errorf("group output ok = %v", got)
	}
	if got := log.names(); !cmp.Equal(got, []string{"read", "verify"}) {
		t.Errorf("called %v", got)
	}
	e.logs.checkFSM(t)
}

// A result of the wrong shape is refused with the schema error and the run
// stays paused; unknown runs and expired pauses fail clearly.
func TestResumeRefusals(t *testing.T) {
	log := &callLog{}
	e := newTestEngine(t, pauseCatalog(t, log), Limits{})
	env := e.Run(t.Context(), mustRequest(t, readEditVerify))
	id := env.Artifact.Resume.ExecID

	bad := e.Run(t.Context(), resumeReq(t, id, `{"edit": {"diff": 42}}`))
	if v := bad.Artifact.ValidationErrors; len(v) != 1 || v[0].Code != CodeInvalidResult || !strings.Contains(v[0].Message, "diff") || !strings.Contains(v[0].Message, "stays paused") {
		t.Fatalf("wrong shape: %s", bad.JSON())
	}
	if bad.Artifact.Resume == nil || bad.Artifact.Resume.ExecID != id {
		t.Errorf("the refusal does not say the run is still paused: %s", bad.JSON())
	}
	other := e.Run(t.Context(), resumeReq(t, id, `{"verify": {"ok": true}}`))
	if v := other.Artifact.ValidationErrors; len(v) != 1 || v[0].Code != CodeInvalidResult {
		t.Errorf("a result for a step that does not wait: %s", other.JSON())
	}
	unknown := e.Run(t.Context(), resumeReq(t, "no-such-run", `{"edit": {"diff": ""}}`))
	if v := unknown.Artifact.ValidationErrors; len(v) != 1 || v[0].Code != CodeUnknownRun {
		t.Errorf("unknown run: %s", unknown.JSON())
	}
	good := e.Run(t.Context(), resumeReq(t, id, `{"edit": {"error": "the file is read-only"}}`))
	if good.Artifact.Status != StatusFailed || good.Artifact.Steps[1].Error.Code != CodeClientError || good.Artifact.Steps[2].Status != StatusSkipped {
		t.Errorf("a client error: %s", good.JSON())
	}
	if got := log.names(); !cmp.Equal(got, []string{"read"}) {
		t.Errorf("called %v", got)
	}

	expiring := newTestEngine(t, pauseCatalog(t, log), Limits{PauseTTL: time.Nanosecond})
	env = expiring.Run(t.Context(), mustRequest(t, readEditVerify))
	late := expiring.Run(t.Context(), resumeReq(t, env.Artifact.Resume.ExecID, `{"edit": {"diff": "+world"}}`))
	if late.Artifact.Status != StatusFailed || len(late.Artifact.Errors) == 0 || late.Artifact.Errors[len(late.Artifact.Errors)-1].Code != CodePauseExpired {
		t.Fatalf("late resume: %s", late.JSON())
	}
	if late.Artifact.Steps[1].Status != StatusCancelled {
		t.Errorf("the expired call is %s", late.Artifact.Steps[1].Status)
	}
	expiring.logs.checkFSM(t)
}

// Concurrent resumes of one paused run: one goes on, the others are
// refused, and the client's step is not run twice.
func TestConcurrentResumesClaimOnce(t *testing.T) {
	log := &callLog{}
	e := newTestEngine(t, pauseCatalog(t, log), Limits{})
	env := e.Run(t.Context(), mustRequest(t, readEditVerify))
	id := env.Artifact.Resume.ExecID
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Go(func() {
			r := e.Run(context.Background(), resumeReq(t, id, `{"edit": {"diff": "+world"}}`))
			mu.Lock()
			defer mu.Unlock()
			if r.Artifact.Success {
				won++
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d resumes went on, want 1", won)
	}
	if got := log.names(); !cmp.Equal(got, []string{"read", "verify"}) {
		t.Errorf("called %v", got)
	}
}

// ask_user asks through elicitation when the client has it: accept goes
// on, decline fails the step with declined; without it, the run pauses.
func TestAskUser(t *testing.T) {
	plan := `{"plan": {"steps": [
		{"id": "ask", "tool": "ask_user", "arguments": {"message": "Delete ${bindings.file}?"}},
		{"id": "del", "tool": "read", "arguments": {"path": "$bindings.file"}}
	]}, "bindings": {"file": "a.txt"}}`
	for _, tc := range []struct {
		action string
		want   string
	}{{"accept", StatusSuccess}, {"decline", StatusFailed}, {"cancel", StatusFailed}} {
		t.Run(tc.action, func(t *testing.T) {
			log := &callLog{}
			e := newTestEngine(t, pauseCatalog(t, log), Limits{})
			var asked string
			ro := RunOptions{Elicit: func(_ context.Context, msg string, _ map[string]any) (string, map[string]any, error) {
				asked = msg
				return tc.action, nil, nil
			}}
			env := e.RunWith(t.Context(), mustRequest(t, plan), ro)
			if env.Artifact.Status != tc.want || asked != "Delete a.txt?" {
				t.Fatalf("asked %q: %s", asked, env.JSON())
			}
			if tc.action != "accept" {
				if c := env.Artifact.Steps[0].Error.Code; c != CodeDeclined {
					t.Errorf("code %s, want declined", c)
				}
				if n := len(log.names()); n != 0 {
					t.Errorf("the gated step ran")
				}
			}
		})
	}
	// No user can be asked: the question fails, so that the step it gates
	// does not run, and says how to let the calling model answer.
	t.Run("no elicitation", func(t *testing.T) {
		log := &callLog{}
		e := newTestEngine(t, pauseCatalog(t, log), Limits{})
		env := e.Run(t.Context(), mustRequest(t, plan))
		a := env.Artifact
		if a.Status != StatusFailed || a.Steps[0].Error == nil || a.Steps[0].Error.Code != CodeUserUnavailable || len(log.names()) != 0 {
			t.Fatalf("status %s, ask %+v, calls %v; want the question failed with %s and nothing run", a.Status, a.Steps[0].Error, log.names(), CodeUserUnavailable)
		}
		if msg := a.Steps[0].Error.Message; !strings.Contains(msg, `"if_no_user": "pause"`) {
			t.Errorf("the error does not say how to let the calling model answer: %s", msg)
		}
	})
	// The plan may ask for a pause instead: the calling model answers, and
	// the run goes on with its answer.
	for name, tc := range map[string]struct {
		plan string
		ro   RunOptions
	}{
		"if_no_user pause":           {strings.Replace(plan, `"message": "Delete ${bindings.file}?"`, `"message": "Delete ${bindings.file}?", "if_no_user": "pause"`, 1), RunOptions{}},
		"the caller asks on a pause": {plan, RunOptions{AskOnPause: true}},
	} {
		t.Run(name, func(t *testing.T) {
			log := &callLog{}
			e := newTestEngine(t, pauseCatalog(t, log), Limits{})
			env := e.RunWith(t.Context(), mustRequest(t, tc.plan), tc.ro)
			if env.Artifact.Status != StatusAwaitingClient || env.Artifact.Pending[0].Tool != AskUserTool {
				t.Fatalf("%s", env.JSON())
			}
			env = e.Run(t.Context(), resumeReq(t, env.Artifact.Resume.ExecID, `{"ask": {"action": "accept", "content": {}}}`))
			if !env.Artifact.Success || len(log.names()) != 1 {
				t.Errorf("%s", env.JSON())
			}
		})
	}
}

// With schedule dag, steps that do not need the client's result run
// before the run pauses.
func TestDagRunsWhatItCanBeforePausing(t *testing.T) {
	log := &callLog{}
	e := newTestEngine(t, pauseCatalog(t, log), Limits{})
	req := `{"client_tools": [` + editTool + `], "plan": {"schedule": "dag", "steps": [
		{"id": "edit", "tool": "edit", "arguments": {"path": "a", "text": "b"}},
		{"id": "v", "tool": "verify", "arguments": {"diff": "$edit.output.diff"}},
		{"id": "other", "tool": "read", "arguments": {"path": "c"}}
	]}}`
	env := e.Run(t.Context(), mustRequest(t, req))
	if env.Artifact.Status != StatusAwaitingClient || env.Artifact.Steps[2].Status != StatusSuccess || env.Artifact.Steps[1].Status != StatusPending {
		t.Fatalf("%s", env.JSON())
	}
	env = e.Run(t.Context(), resumeReq(t, env.Artifact.Resume.ExecID, `{"edit": {"diff": "+world"}}`))
	if !env.Artifact.Success {
		t.Fatalf("%s", env.JSON())
	}
	if got := log.names(); !cmp.Equal(got, []string{"read", "verify"}) {
		t.Errorf("called %v", got)
	}
	e.logs.checkFSM(t)
}

// Client tools are validated like any tool: arguments against their input
// schema, references against their output schema.
func TestClientToolsAreValidated(t *testing.T) {
	e := newTestEngine(t, pauseCatalog(t, &callLog{}), Limits{})
	req := `{"client_tools": [` + editTool + `, {"name": "read"}], "plan": {"steps": [
		{"id": "edit", "tool": "edit", "arguments": {"path": 3}},
		{"id": "v", "tool": "verify", "arguments": {"diff": "$edit.output.nope"}}
	]}}`
	env := e.Run(t.Context(), mustRequest(t, req))
	var codes []Code
	for _, v := range env.Artifact.ValidationErrors {
		codes = append(codes, v.Code)
	}
	data, _ := json.Marshal(env.Artifact.ValidationErrors)
	for _, want := range []Code{CodeInvalidArguments, CodeFieldNotFound, CodeInvalidValue} {
		if !slices.Contains(codes, want) {
			t.Errorf("no %s among %s", want, data)
		}
	}
}

// A tool loop cannot pause: a client tool in its one-step plans is refused
// before anything runs, with client_in_loop, and so is an ask_user that
// would pause; ask_user still asks when the client has elicitation.
func TestToolLoopsCannotPause(t *testing.T) {
	e := newTestEngine(t, pauseCatalog(t, &callLog{}), Limits{})
	req := mustRequest(t, `{"client_tools": [`+editTool+`], "plan": {"steps": [{"id": "e", "tool": "edit", "arguments": {"path": "a", "text": "b"}}]}}`)
	req.NoPause = true
	env := e.Run(t.Context(), req)
	if v := env.Artifact.ValidationErrors; len(v) != 1 || v[0].Code != CodeClientInLoop {
		t.Fatalf("%s", env.JSON())
	}
	ask := mustRequest(t, `{"plan": {"steps": [{"id": "q", "tool": "ask_user", "arguments": {"message": "ok?"}}]}}`)
	ask.NoPause = true
	// Without a user to ask, the question fails; a question that would
	// pause (for the calling model, or for a caller that asks its user on
	// a pause) is refused.
	if env := e.Run(t.Context(), ask); env.Artifact.Steps[0].Error == nil || env.Artifact.Steps[0].Error.Code != CodeUserUnavailable {
		t.Errorf("ask_user without a user in a tool loop: %s", env.JSON())
	}
	if env := e.RunWith(t.Context(), ask, RunOptions{AskOnPause: true}); len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != CodeClientInLoop {
		t.Errorf("ask_user asked on a pause in a tool loop: %s", env.JSON())
	}
	pausing := mustRequest(t, `{"plan": {"steps": [{"id": "q", "tool": "ask_user", "arguments": {"message": "ok?", "if_no_user": "pause"}}]}}`)
	pausing.NoPause = true
	if env := e.Run(t.Context(), pausing); len(env.Artifact.ValidationErrors) != 1 || env.Artifact.ValidationErrors[0].Code != CodeClientInLoop {
		t.Errorf("ask_user that pauses for the model in a tool loop: %s", env.JSON())
	}
	// Whether a question pauses is read from its arguments as written, as
	// the plan-time check reads them: a template there, which would
	// resolve to "pause" only once the loop was let in, is refused.
	templated := mustRequest(t, `{"bindings": {"mode": "pause"}, "plan": {"steps": [{"id": "q", "tool": "ask_user", "arguments": {"message": "ok?", "if_no_user": "${bindings.mode}"}}]}}`)
	templated.NoPause = true
	if env := e.Run(t.Context(), templated); env.Artifact.Status == StatusAwaitingClient || len(env.Artifact.ValidationErrors) != 1 ||
		env.Artifact.ValidationErrors[0].Code != CodeInvalidArguments || env.Artifact.ValidationErrors[0].Argument != "if_no_user" {
		t.Errorf("ask_user whose if_no_user is a template, in a tool loop: %s", env.JSON())
	}
	elicit := func(context.Context, string, map[string]any) (string, map[string]any, error) {
		return "accept", nil, nil
	}
	if env := e.RunWith(t.Context(), ask, RunOptions{Elicit: elicit}); !env.Artifact.Success {
		t.Errorf("ask_user with elicitation in a tool loop: %s", env.JSON())
	}
}

// A run that stops while a call waits for the client does not pause: a
// failing sibling in a collect group, or a failing step of a dag, cancels
// the waiting call and the run fails with every step ended once.
func TestStoppedRunsDoNotPause(t *testing.T) {
	// fail fails only once the client call has started: else the halt
	// could skip it before it waits, and there would be nothing to cancel.
	var started chan struct{}
	fail := fakeTool(t, "fail", "", "", func(ctx context.Context, _ map[string]any) (*registry.Result, error) {
		select {
		case <-started:
		case <-ctx.Done():
		}
		return registry.ErrorResult("broken"), nil
	})
	cat := registry.NewCatalog(fail)
	hooks := &Hooks{StepStarted: func(i StepStartedInfo) {
		if i.Step.ID == "e" {
			close(started)
		}
	}}
	for name, req := range map[string]string{
		"group": `{"client_tools": [{"name": "edit"}], "plan": {"steps": [{"id": "g", "parallel": [
			{"id": "e", "tool": "edit", "arguments": {}}, {"id": "f", "tool": "fail", "arguments": {}}]}]}}`,
		"dag": `{"client_tools": [{"name": "edit"}], "plan": {"schedule": "dag", "steps": [
			{"id": "e", "tool": "edit", "arguments": {}}, {"id": "f", "tool": "fail", "arguments": {}}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			started = make(chan struct{})
			e := newTestEngine(t, cat, Limits{}, hooks)
			env := e.Run(t.Context(), mustRequest(t, req))
			if env.Artifact.Status != StatusFailed || len(env.Artifact.Pending) != 0 {
				t.Fatalf("%s", env.JSON())
			}
			var cancelled bool
			var walk func([]*StepRecord)
			walk = func(rs []*StepRecord) {
				for _, r := range rs {
					if r.ID == "e" {
						cancelled = r.Status == StatusCancelled
					}
					walk(r.Children)
				}
			}
			walk(env.Artifact.Steps)
			if !cancelled {
				t.Errorf("the waiting call was not cancelled: %s", env.JSON())
			}
			checkLifecycle(t, env, e.rec.calls())
			e.logs.checkFSM(t)
		})
	}
}

// A loop's iterations cannot pause: a client tool in a for_each body is
// refused at plan time with client_in_loop.
func TestClientToolInLoopIsRefused(t *testing.T) {
	e := newTestEngine(t, pauseCatalog(t, &callLog{}), Limits{})
	env := e.Run(t.Context(), mustRequest(t, `{"client_tools": [`+editTool+`], "plan": {"steps": [
		{"id": "r", "for_each": ["a", "b"], "as": "f", "do": {"tool": "edit", "arguments": {"path": "$f", "text": "x"}}}]}}`))
	if v := env.Artifact.ValidationErrors; len(v) != 1 || v[0].Code != CodeClientInLoop {
		t.Fatalf("%s", env.JSON())
	}
}
