package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/orchestra-mcp/orchestra/toolcontext"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with what the code produces")

// A golden case is one txtar file: its comment says what it checks, and its
// files are
//
//	catalog        the name of a test catalog (default "default")
//	options.json   limits, depth and cancellation (optional)
//	request.json   the agent_orchestrate input
//	want.json      the expected output, rewritten by -update
type goldenCase struct {
	path    string
	archive *txtar.Archive
}

func (c *goldenCase) file(name string) ([]byte, bool) {
	for _, f := range c.archive.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func loadGolden(t *testing.T, dir string) []*goldenCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no golden files in testdata/%s", dir)
	}
	var out []*goldenCase
	for _, p := range paths {
		a, err := txtar.ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &goldenCase{path: p, archive: a})
	}
	return out
}

// check compares got (marshalled to JSON) with want.json, or rewrites
// want.json under -update.
func (c *goldenCase) check(t *testing.T, got any) {
	t.Helper()
	gotJSON, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatalf("marshalling the result: %v", err)
	}
	gotJSON = append(gotJSON, '\n')
	if *update {
		found := false
		for i, f := range c.archive.Files {
			if f.Name == "want.json" {
				c.archive.Files[i].Data = gotJSON
				found = true
			}
		}
		if !found {
			c.archive.Files = append(c.archive.Files, txtar.File{Name: "want.json", Data: gotJSON})
		}
		if err := os.WriteFile(c.path, txtar.Format(c.archive), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	wantJSON, ok := c.file("want.json")
	if !ok {
		t.Fatalf("%s has no want.json; run go test -run %s -update to write it", c.path, t.Name())
	}
	var want, gotV any
	if err := json.Unmarshal(wantJSON, &want); err != nil {
		t.Fatalf("%s: want.json: %v", c.path, err)
	}
	if err := json.Unmarshal(gotJSON, &gotV); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, gotV); diff != "" {
		t.Errorf("%s: mismatch (-want +got):\n%s", c.path, diff)
	}
}

func (c *goldenCase) name() string {
	return strings.TrimSuffix(filepath.Base(c.path), ".txtar")
}

// goldenOptions are the knobs of options.json.
type goldenOptions struct {
	Limits struct {
		MaxDepth           int `json:"max_depth"`
		MaxSteps           int `json:"max_steps"`
		MaxParallel        int `json:"max_parallel"`
		MaxNesting         int `json:"max_nesting"`
		MaxAttempts        int `json:"max_attempts"`
		StepTimeoutMS      int `json:"step_timeout_ms"`
		PlanTimeoutMS      int `json:"plan_timeout_ms"`
		MaxStepOutputBytes int `json:"max_step_output_bytes"`
		MaxResponseBytes   int `json:"max_response_bytes"`
		MaxTemplates       int `json:"max_templates"`
	} `json:"limits"`
	// Depth is the orchestration depth of the caller.
	Depth int `json:"depth"`
	// CancelAfterMS cancels the caller's context after that much fake time.
	CancelAfterMS int `json:"cancel_after_ms"`
	// Prompt runs the prompt path with a planner that returns the request's
	// plan; PlannerError makes the planner fail instead.
	Prompt       bool   `json:"prompt"`
	PlannerError string `json:"planner_error"`
}

func (o goldenOptions) limits() Limits {
	l := o.Limits
	return Limits{
		MaxDepth: l.MaxDepth, MaxSteps: l.MaxSteps, MaxParallel: l.MaxParallel, MaxNesting: l.MaxNesting,
		MaxAttempts: l.MaxAttempts, StepTimeout: time.Duration(l.StepTimeoutMS) * time.Millisecond,
		PlanTimeout: time.Duration(l.PlanTimeoutMS) * time.Millisecond, MaxStepOutputBytes: l.MaxStepOutputBytes,
		MaxResponseBytes: l.MaxResponseBytes, MaxTemplates: l.MaxTemplates,
	}
}

func (c *goldenCase) setup(t *testing.T) (goldenOptions, string, []byte) {
	t.Helper()
	var opts goldenOptions
	if data, ok := c.file("options.json"); ok {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&opts); err != nil {
			t.Fatalf("%s: options.json: %v", c.path, err)
		}
	}
	catalog := "default"
	if data, ok := c.file("catalog"); ok {
		catalog = strings.TrimSpace(string(data))
	}
	if _, ok := testCatalogs[catalog]; !ok {
		t.Fatalf("%s: unknown catalog %q", c.path, catalog)
	}
	req, ok := c.file("request.json")
	if !ok {
		t.Fatalf("%s: no request.json", c.path)
	}
	return opts, catalog, req
}

// TestGoldenDecode decodes requests into normalized plans or issues.
func TestGoldenDecode(t *testing.T) {
	for _, c := range loadGolden(t, "decode") {
		t.Run(c.name(), func(t *testing.T) {
			_, _, data := c.setup(t)
			req, issues := DecodeRequest(data)
			type result struct {
				Request *Request `json:"request"`
				Issues  []*Issue `json:"issues"`
			}
			c.check(t, result{req, issues})
			if (req == nil) == (len(issues) == 0) {
				t.Errorf("DecodeRequest returned request %v and %d issues; want exactly one of them", req != nil, len(issues))
			}
			if req != nil && req.Plan != nil {
				// The normalized plan decodes to itself.
				again := reencode(t, req)
				if diff := cmp.Diff(normalizedJSON(t, req), normalizedJSON(t, again)); diff != "" {
					t.Errorf("the normalized request does not decode to itself (-first +second):\n%s", diff)
				}
			}
		})
	}
}

// TestGoldenValidate validates plans against a catalog.
func TestGoldenValidate(t *testing.T) {
	for _, c := range loadGolden(t, "validate") {
		t.Run(c.name(), func(t *testing.T) {
			opts, catalog, data := c.setup(t)
			req := mustRequest(t, string(data))
			e := NewEngine(Options{Tools: testCatalogs[catalog](t), Limits: opts.limits(), Forbidden: func(name string) bool { return name == "agent_orchestrate" }})
			v := e.Validate(req)
			c.check(t, v)
			if strings.HasPrefix(c.name(), "ok_") && !v.OK() {
				t.Errorf("an ok_ case must validate")
			}
			if strings.HasPrefix(c.name(), "bad_") && v.OK() {
				t.Errorf("a bad_ case must not validate")
			}
		})
	}
}

// traceStep is the deterministic part of a StepRecord.
type traceStep struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Tool      string         `json:"tool,omitempty"`
	ResultKey string         `json:"result_key,omitempty"`
	Merge     string         `json:"merge,omitempty"`
	Status    string         `json:"status"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Output    any            `json:"output,omitempty"`
	Error     *Error         `json:"error,omitempty"`
	Attempts  int            `json:"attempts,omitempty"`
	SkillID   string         `json:"skill_id,omitempty"`
	Iteration *int           `json:"iteration,omitempty"`
	Skipped   int            `json:"skipped_iterations,omitempty"`
	Reason    *Error         `json:"reason,omitempty"`
	Children  []*traceStep   `json:"children,omitempty"`
}

// trace is the deterministic part of an envelope plus the state machine's
// path.
type trace struct {
	ArtifactID       string         `json:"artifact_id"`
	Status           string         `json:"status"`
	Success          bool           `json:"success"`
	DryRun           bool           `json:"dry_run,omitempty"`
	Response         string         `json:"response,omitempty"`
	Truncated        bool           `json:"truncated,omitempty"`
	Depth            int            `json:"depth"`
	Steps            []*traceStep   `json:"steps"`
	Bindings         map[string]any `json:"bindings"`
	Errors           []*Error       `json:"errors"`
	ValidationErrors []*Issue       `json:"validation_errors"`
	Warnings         []*Issue       `json:"warnings,omitempty"`
	// FSM lists the state-changing transitions as "event: from -> to".
	FSM []string `json:"fsm"`
}

func traceSteps(rs []*StepRecord) []*traceStep {
	var out []*traceStep
	for _, r := range rs {
		out = append(out, &traceStep{
			ID: r.ID, Type: r.Type, Tool: r.Tool, ResultKey: r.ResultKey, Merge: r.Merge, Status: r.Status,
			Arguments: r.Arguments, Output: r.Output, Error: r.Error, Attempts: r.Attempts, SkillID: r.SkillID,
			Iteration: r.Iteration, Skipped: r.SkippedIterations, Reason: r.Reason, Children: traceSteps(r.Children),
		})
	}
	return out
}

func makeTrace(env *Envelope, rec *pathRecorder) *trace {
	a := env.Artifact
	return &trace{
		ArtifactID: env.ArtifactID, Status: a.Status, Success: a.Success, DryRun: a.DryRun, Response: a.Response,
		Truncated: a.Truncated, Depth: env.Metadata.Depth, Steps: traceSteps(a.Steps), Bindings: a.Bindings,
		Errors: a.Errors, ValidationErrors: a.ValidationErrors, Warnings: a.Warnings, FSM: rec.path(),
	}
}

// TestGoldenRun runs plans against fake tools, in a synctest bubble so that
// timeouts, backoff and slow tools run on a fake clock.
func TestGoldenRun(t *testing.T) {
	for _, c := range loadGolden(t, "run") {
		t.Run(c.name(), func(t *testing.T) {
			opts, catalog, data := c.setup(t)
			req := mustRequest(t, string(data))
			synctest.Test(t, func(t *testing.T) {
				te := newTestEngine(t, testCatalogs[catalog](t), opts.limits())
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				ctx = toolcontext.WithDepth(ctx, opts.Depth)
				if opts.CancelAfterMS > 0 {
					time.AfterFunc(time.Duration(opts.CancelAfterMS)*time.Millisecond, cancel)
				}
				var env *Envelope
				if opts.PlannerError != "" || opts.Prompt {
					plan := req.Plan
					req.Plan = nil
					env = te.RunPrompt(ctx, req, func(ctx context.Context) (*Plan, *PlannerInfo, []*Issue, error) {
						if opts.PlannerError != "" {
							return nil, &PlannerInfo{ModelCalls: 1, Attempts: 1}, nil, fmt.Errorf("%s", opts.PlannerError)
						}
						return plan, &PlannerInfo{ModelCalls: 1, Attempts: 1}, nil, nil
					})
				} else {
					env = te.Run(ctx, req)
				}
				te.logs.checkFSM(t)
				checkLifecycle(t, env, te.rec.calls())
				c.check(t, makeTrace(env, te.rec))
				// The envelope always marshals, and says the same in text.
				if _, err := json.Marshal(env); err != nil {
					t.Errorf("marshalling the envelope: %v", err)
				}
				if env.Artifact.Success != (env.Artifact.Status == StatusSuccess) {
					t.Errorf("success %v disagrees with status %q", env.Artifact.Success, env.Artifact.Status)
				}
			})
		})
	}
}

func reencode(t testing.TB, req *Request) *Request {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatalf("marshalling the request: %v", err)
	}
	again, issues := DecodeRequest(data)
	if len(issues) > 0 {
		out, _ := json.Marshal(issues)
		t.Fatalf("the normalized request %s does not decode: %s", data, out)
	}
	return again
}

func normalizedJSON(t testing.TB, req *Request) any {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
