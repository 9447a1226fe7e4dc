package orchestrate

import (
	"fmt"
	"time"

	"github.com/orchestra-mcp/orchestra/schemas"
)

// Background runs: a request with "background": true is answered as soon
// as it passed every check that can be made before it runs, with an
// envelope whose artifact.status is "running"; the caller then awaits or
// cancels the run by its exec id. The engine checks and runs; who keeps the
// runs going and answers await and cancel is the server's (package server).

// AwaitRequest waits for a background run: the final envelope as soon as
// the run ends, or, when TimeoutMS passes first, its status and progress.
type AwaitRequest struct {
	ExecID string `json:"exec_id"`
	// TimeoutMS is how long to wait; 0 takes the server's default. The
	// server caps it.
	TimeoutMS int `json:"timeout_ms,omitempty"`
}

// CancelRequest stops a background run: its steps in flight are
// cancelled and no other starts.
type CancelRequest struct {
	ExecID string `json:"exec_id"`
}

// BackgroundInfo is artifact.background: what a run that goes on without
// its caller has done so far, and how to wait for it.
type BackgroundInfo struct {
	ExecID string `json:"exec_id"`
	// Record is the resource of the run's execution record; clients that
	// subscribe to it are told as steps end and when the run ends.
	Record string `json:"record,omitempty"`
	// Steps counts the run's tool steps, as far as they are known (0
	// while a planner writes the plan).
	Steps int `json:"steps"`
	// StepsEnded counts the tool steps that ended.
	StepsEnded int `json:"steps_ended"`
	// How is the request that waits for the run.
	How string `json:"how"`
}

var (
	awaitFields  = []string{"exec_id", "timeout_ms"}
	cancelFields = []string{"exec_id"}
)

func (d *decoder) await(v any, path string) *AwaitRequest {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf(`await must be an object {"exec_id": "...", "timeout_ms": 30000}, not %s`, schemas.TypePhrase(v)))
		return nil
	}
	aw := &AwaitRequest{}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "exec_id":
			aw.ExecID = d.str(obj[k], path+".exec_id")
		case "timeout_ms":
			aw.TimeoutMS = d.posInt(obj[k], path+".timeout_ms")
		default:
			d.unknown(path, k, awaitFields)
		}
	}
	if aw.ExecID == "" {
		d.add(path+".exec_id", CodeMissingField, "await needs the exec_id of the background run (its artifact.background.exec_id)")
	}
	return aw
}

func (d *decoder) cancel(v any, path string) *CancelRequest {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf(`cancel must be an object {"exec_id": "..."}, not %s`, schemas.TypePhrase(v)))
		return nil
	}
	c := &CancelRequest{}
	for _, k := range sortedKeys(obj) {
		switch k {
		case "exec_id":
			c.ExecID = d.str(obj[k], path+".exec_id")
		default:
			d.unknown(path, k, cancelFields)
		}
	}
	if c.ExecID == "" {
		d.add(path+".exec_id", CodeMissingField, "cancel needs the exec_id of the background run")
	}
	return c
}

// control checks that an await or a cancel comes alone: it starts nothing.
func (d *decoder) control(obj map[string]any, req *Request) {
	name := "await"
	if req.Await == nil {
		name = "cancel"
	} else if req.Cancel != nil {
		d.add("", CodeInvalidRequest, "both await and cancel are set; send one")
		return
	}
	for _, k := range sortedKeys(obj) {
		if k != name {
			d.add(k, CodeInvalidRequest, fmt.Sprintf("%s acts on a background run and starts nothing; send it without %s", name, k))
		}
	}
}

// RunningEnvelope is the answer about a run that goes on: artifact.status
// "running", its progress in artifact.background, and _metadata as the
// final envelope will have it. ended counts the tool steps that ended.
func (e *Engine) RunningEnvelope(info *RunInfo, ended int) *Envelope {
	rec := ""
	if e.opts.Record != nil {
		rec = e.opts.Record(info.ExecID)
	}
	a := &Artifact{Status: StatusRunning, Plan: info.Plan, Steps: []*StepRecord{}, Errors: []*Error{}, ValidationErrors: []*Issue{},
		Background: &BackgroundInfo{ExecID: info.ExecID, Record: rec, Steps: info.Steps(), StepsEnded: ended,
			How: `call agent_orchestrate with {"await": {"exec_id": "` + info.ExecID + `", "timeout_ms": 30000}}: it answers when the run ends, or with its progress when the time is up; {"cancel": {"exec_id": "` + info.ExecID + `"}} stops it`}}
	meta := Metadata{ContextID: info.IDs.ContextID, RequestID: info.IDs.RequestID, TraceID: info.IDs.TraceID, UserID: info.IDs.UserID,
		ToolName: e.opts.ToolName, ExecutedAt: info.StartedAt.UTC().Format(time.RFC3339Nano), DurationMS: time.Since(info.StartedAt).Milliseconds(),
		Depth: info.Depth, ExecID: info.ExecID, Record: rec}
	return &Envelope{ArtifactID: info.ExecID, Artifact: a, Metadata: meta}
}
