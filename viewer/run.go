package viewer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
)

// Bounds of what a run's page reads.
const (
	maxChildRuns  = 500 // runs one run started, drawn under its steps
	maxChildDepth = 4   // runs started by runs started by... (orchestra's max_depth is 3)
)

// runPage is a run's page.
type runPage struct {
	Live   runBody
	Detail *stepDetail // the step ?step= names, drawn without the script
}

func (p runPage) title() string { return "Run " + shortID(p.Live.Run.ExecID) }

// runBody is the part of a run's page that a running run redraws.
type runBody struct {
	Run       *store.Run
	Row       runsRow
	Chart     *chart
	IsLive    bool
	LiveURL   string
	PollMS    int64
	Parent    string // the URL of the run that started this one
	Pending   []pendingCall
	Paused    *store.PauseEvent
	Insights  []insightRow
	Plan, Env *body
	Truncated bool // more runs were started than are drawn
}

// pendingCall is a call a paused run waits for.
type pendingCall struct {
	CallID, Step, Tool string
	Arguments          *body
}

// insightRow is an insight about a tool of the run.
type insightRow struct {
	store.Insight
	ThisRun bool // last seen while the run ran
	ToolURL string
}

func (v *Viewer) runPage(w http.ResponseWriter, r *http.Request, id Identity) {
	execID := r.PathValue("id")
	if err := checkID("exec id", execID, maxID); err != nil {
		v.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	live, err := v.runBody(r.Context(), id.Scope, execID)
	if err != nil {
		v.readFailed(w, r, "run "+execID, err)
		return
	}
	page := runPage{Live: *live}
	if stepID := r.URL.Query().Get("step"); stepID != "" {
		in := r.URL.Query().Get("in")
		if in == "" {
			in = execID
		}
		if checkID("exec id", in, maxID) == nil && checkID("step id", stepID, maxStepID) == nil {
			page.Detail, _ = v.stepDetail(r.Context(), id.Scope, in, stepID)
		}
		for i := range page.Live.Chart.Rows {
			row := &page.Live.Chart.Rows[i]
			row.Selected = row.Run == in && row.Step == stepID
		}
	}
	v.render(w, r, http.StatusOK, "run", page, id)
}

// livePart is the redrawn part of a run's page, for its script: with an
// ETag, so that a poll of a run that did not move costs a 304.
func (v *Viewer) livePart(w http.ResponseWriter, r *http.Request, id Identity) {
	execID := r.PathValue("id")
	if err := checkID("exec id", execID, maxID); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	live, err := v.runBody(r.Context(), id.Scope, execID)
	if err != nil {
		v.partFailed(w, r, err)
		return
	}
	var buf bytes.Buffer
	if err := v.pages.t["parts"].ExecuteTemplate(&buf, "runbody", live); err != nil {
		v.log.Error("viewer: drawing a run", "exec_id", execID, "err", err)
		http.Error(w, "drawing the run failed; the server's log says why", http.StatusInternalServerError)
		return
	}
	sum := sha256.Sum256(buf.Bytes())
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// partFailed answers a failed read of a fragment with plain text.
func (v *Viewer) partFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		http.Error(w, "not found, or not yours to see", http.StatusNotFound)
	case r.Context().Err() != nil:
	default:
		v.log.Error("viewer: reading records", "path", r.URL.Path, "err", err)
		http.Error(w, "reading the records failed: "+err.Error(), http.StatusServiceUnavailable)
	}
}

// runBody reads what a run's live part draws: its steps and those of the
// runs it started, its pauses, the insights about its tools.
func (v *Viewer) runBody(ctx context.Context, scope store.Scope, execID string) (*runBody, error) {
	tree, truncated, err := v.readTree(ctx, scope, execID)
	if err != nil {
		return nil, err
	}
	run := tree.run
	pauses, err := v.opts.Records.PausesIn(ctx, scope, execID)
	if err != nil {
		return nil, err
	}
	bodies, err := v.opts.Records.RunIn(ctx, scope, execID)
	if err != nil {
		return nil, err
	}
	now := v.now()
	page := v.prefix + "runs/" + url.PathEscape(execID)
	b := &runBody{Run: run, Row: v.runsRow(run, now), Chart: buildChart(tree, pauses, now), Truncated: truncated,
		IsLive:  run.Status == store.StatusRunning || run.Status == store.StatusPaused,
		LiveURL: page + "/live", PollMS: v.opts.PollInterval.Milliseconds(),
		Plan: jsonBody(bodies.Plan, runBodyLimit, page+"/raw?part=plan"), Env: jsonBody(bodies.Envelope, runBodyLimit, page+"/raw?part=envelope")}
	for i := range b.Chart.Rows {
		row := &b.Chart.Rows[i]
		if row.Step == "" { // a run no step of this one's started: its own page
			row.Href = v.prefix + "runs/" + url.PathEscape(row.Run)
			continue
		}
		q := url.Values{"step": {row.Step}}
		if row.Run != execID {
			q.Set("in", row.Run)
		}
		row.Href = page + "?" + q.Encode() + "#detail"
		row.DetailURL = v.prefix + "runs/" + url.PathEscape(row.Run) + "/step?id=" + url.QueryEscape(row.Step)
	}
	if run.ParentExecID != "" {
		b.Parent = v.prefix + "runs/" + url.PathEscape(run.ParentExecID)
	}
	if run.Status == store.StatusPaused && len(pauses) > 0 && pauses[len(pauses)-1].Event == "paused" {
		last := pauses[len(pauses)-1]
		b.Paused = &last
		b.Pending = pendingCalls(last.Detail)
	}
	b.Insights, err = v.runInsights(ctx, scope, tree, now)
	return b, err
}

// readTree reads a run's outline and, depth first, those of the runs it
// started, at most maxChildRuns of them.
func (v *Viewer) readTree(ctx context.Context, scope store.Scope, execID string) (*runTree, bool, error) {
	run, steps, err := v.opts.Records.OutlineIn(ctx, scope, execID)
	if err != nil {
		return nil, false, err
	}
	root := &runTree{run: run, steps: steps}
	budget, truncated := maxChildRuns, false
	var children func(t *runTree, depth int) error
	children = func(t *runTree, depth int) error {
		if depth >= maxChildDepth || budget <= 0 {
			return nil
		}
		kids, next, err := v.opts.Records.List(ctx, store.ListOptions{Scope: scope, Parent: t.run.ExecID, Limit: budget})
		if err != nil {
			return err
		}
		truncated = truncated || next != ""
		budget -= len(kids)
		slices.Reverse(kids) // oldest first
		for i := range kids {
			run, steps, err := v.opts.Records.OutlineIn(ctx, scope, kids[i].ExecID)
			if err != nil {
				return err
			}
			child := &runTree{run: run, steps: steps}
			t.children = append(t.children, child)
			if err := children(child, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := children(root, 0); err != nil {
		return nil, false, err
	}
	return root, truncated, nil
}

// pendingCalls reads the calls of a "paused" event's detail.
func pendingCalls(detail json.RawMessage) []pendingCall {
	var calls []struct {
		CallID    string          `json:"call_id"`
		Step      any             `json:"step"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(detail, &calls) != nil {
		return nil
	}
	out := make([]pendingCall, 0, len(calls))
	for _, c := range calls {
		out = append(out, pendingCall{CallID: c.CallID, Step: fmt.Sprint(c.Step), Tool: c.Tool,
			Arguments: jsonBody(c.Arguments, stepBodyLimit, "")})
	}
	return out
}

// runInsights are the insights about the tools the run called, those
// last seen while it ran marked.
func (v *Viewer) runInsights(ctx context.Context, scope store.Scope, t *runTree, now time.Time) ([]insightRow, error) {
	var tools []string
	var walk func(t *runTree)
	walk = func(t *runTree) {
		for _, st := range t.steps {
			if st.Tool != "" && st.Kind != "model" && !slices.Contains(tools, st.Tool) {
				tools = append(tools, st.Tool)
			}
		}
		for _, c := range t.children {
			walk(c)
		}
	}
	walk(t)
	if len(tools) == 0 {
		return nil, nil
	}
	ins, err := v.opts.Records.Insights(ctx, store.InsightQuery{Scope: scope, Tools: tools, Limit: 50})
	if err != nil {
		return nil, err
	}
	end := runEnd(t, now).Add(time.Minute) // reflections come just after the run
	out := make([]insightRow, 0, len(ins))
	for _, in := range ins {
		out = append(out, insightRow{Insight: in, ThisRun: !in.LastSeen.Before(t.run.StartedAt) && !in.LastSeen.After(end),
			ToolURL: v.prefix + "insights/" + url.PathEscape(in.Tool)})
	}
	return out, nil
}

// stepDetail is what clicking a bar shows.
type stepDetail struct {
	Run       *store.Run
	RunURL    string
	Step      store.StepRecord
	Arguments *body
	Output    *body
	Error     *body
	ErrCode   string
	ErrMsg    string
	Ended     time.Time
}

func (v *Viewer) stepDetail(ctx context.Context, scope store.Scope, execID, stepID string) (*stepDetail, error) {
	run, err := v.opts.Records.RunIn(ctx, scope, execID)
	if err != nil {
		return nil, err
	}
	run.Plan, run.Envelope = nil, nil
	st, err := v.opts.Records.StepIn(ctx, scope, execID, stepID)
	if err != nil {
		return nil, err
	}
	raw := v.prefix + "runs/" + url.PathEscape(execID) + "/raw?step=" + url.QueryEscape(stepID) + "&part="
	d := &stepDetail{Run: run, RunURL: v.prefix + "runs/" + url.PathEscape(execID), Step: *st,
		Arguments: jsonBody(st.Arguments, stepBodyLimit, raw+"arguments"),
		Output:    jsonBody(st.Output, stepBodyLimit, raw+"output"),
		Error:     jsonBody(st.Error, stepBodyLimit, raw+"error")}
	if !st.StartedAt.IsZero() {
		d.Ended = st.StartedAt.Add(time.Duration(st.DurationMS) * time.Millisecond)
	}
	var e struct{ Code, Message string }
	if json.Unmarshal(st.Error, &e) == nil {
		d.ErrCode, d.ErrMsg = e.Code, e.Message
	}
	return d, nil
}

// stepPart is a step's detail, for the script that shows it beside the
// chart.
func (v *Viewer) stepPart(w http.ResponseWriter, r *http.Request, id Identity) {
	execID, stepID := r.PathValue("id"), r.URL.Query().Get("id")
	if err := checkID("exec id", execID, maxID); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := checkID("step id", stepID, maxStepID); err != nil {
		http.Error(w, err.Error()+": give it as ?id=STEP", http.StatusBadRequest)
		return
	}
	d, err := v.stepDetail(r.Context(), id.Scope, execID, stepID)
	if err != nil {
		v.partFailed(w, r, err)
		return
	}
	v.write(w, r, http.StatusOK, v.pages.t["parts"], "step", d)
}

// raw answers with a whole JSON body: a run's plan or envelope, or a
// step's arguments, output or error.
func (v *Viewer) raw(w http.ResponseWriter, r *http.Request, id Identity) {
	execID, q := r.PathValue("id"), r.URL.Query()
	part, stepID := q.Get("part"), q.Get("step")
	if err := checkID("exec id", execID, maxID); err != nil {
		v.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	var data json.RawMessage
	switch part {
	case "plan", "envelope":
		run, err := v.opts.Records.RunIn(r.Context(), id.Scope, execID)
		if err != nil {
			v.readFailed(w, r, "run "+execID, err)
			return
		}
		data = run.Plan
		if part == "envelope" {
			data = run.Envelope
		}
	case "arguments", "output", "error":
		if err := checkID("step id", stepID, maxStepID); err != nil {
			v.fail(w, r, http.StatusBadRequest, err.Error()+": give it as &step=STEP")
			return
		}
		st, err := v.opts.Records.StepIn(r.Context(), id.Scope, execID, stepID)
		if err != nil {
			v.readFailed(w, r, "step "+stepID+" of run "+execID, err)
			return
		}
		data = map[string]json.RawMessage{"arguments": st.Arguments, "output": st.Output, "error": st.Error}[part]
	default:
		v.fail(w, r, http.StatusBadRequest, fmt.Sprintf("part %q is not one of plan, envelope, arguments, output, error", clip(part)))
		return
	}
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Disposition", "inline")
	w.Write(data)
}
