package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// progress sends the notifications/progress of one request whose caller
// sent a progress token.
//
// The rule: one notification when a step starts, and one when it ends,
// for tool steps and parallel groups alike, at any depth; a step skipped
// because a step it needs failed ends without starting (one notification).
// Steps that never start because the plan halted, timed out or was
// cancelled send none. A plan with T tool steps and G groups that all run
// sends 2(T+G) notifications. Progress is the number of tool steps that
// ended, total the number of tool steps. A downstream tool's own progress
// becomes another notification about its step, its fraction folded into
// the step's share; progress never goes backwards.
type progress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any

	mu       sync.Mutex
	finished map[*orchestrate.RunInfo]int // tool steps ended, per run
	last     float64                      // the last progress sent
}

// newProgress returns the progress of a request, or nil when the caller
// sent no progress token.
func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	return &progress{ctx: ctx, session: req.Session, token: tok, finished: map[*orchestrate.RunInfo]int{}}
}

func (p *progress) observe(ev orchestrate.Event) {
	info, s := ev.Run, ev.Step
	if info == nil {
		return
	}
	if ev.Transition.Event == orchestrate.EventFinal {
		p.mu.Lock()
		delete(p.finished, info)
		p.mu.Unlock()
		return
	}
	if s == nil {
		return
	}
	kind := "step " + s.ID
	if s.Type == "parallel" {
		kind = "group " + s.ID
	} else if s.Tool != "" {
		kind += " (" + s.Tool + ")"
	}
	var msg string
	var frac float64 // of the step's share, for downstream progress
	ended := false
	switch {
	case ev.Transition.Event == orchestrate.EventProgress && ev.Progress != nil:
		msg = kind + ": " + ev.Progress.Message
		if ev.Progress.Message == "" {
			msg = fmt.Sprintf("%s: %g", kind, ev.Progress.Progress)
		}
		if ev.Progress.Total > 0 {
			frac = min(max(ev.Progress.Progress/ev.Progress.Total, 0), 0.99)
		}
	case stepStarted(ev):
		msg = kind + ": started"
	case stepEnded(ev):
		ended = true
		msg = fmt.Sprintf("%s: %s in %s", kind, s.Status, (time.Duration(s.DurationMS) * time.Millisecond).String())
		if s.Error != nil {
			msg += " (" + s.Error.Code + ")"
		}
	default:
		return
	}

	p.mu.Lock()
	defer p.mu.Unlock() // in order: values sent never go backwards
	if ended {
		switch {
		case s.Type != "parallel":
			p.finished[info]++
		case s.StartedAt == nil:
			// A group skipped whole: its tool steps end with it.
			p.finished[info] += groupLeaves(info.Plan, s.ID)
		}
	}
	value := max(p.last, float64(p.finished[info])+frac)
	p.last = value
	_ = p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token, Progress: value, Total: float64(info.Leaves), Message: msg,
	})
}

// groupLeaves counts the tool steps of the group id of plan.
func groupLeaves(plan *orchestrate.Plan, id string) int {
	if plan == nil {
		return 0
	}
	var find func([]*orchestrate.Step) int
	find = func(steps []*orchestrate.Step) int {
		for _, st := range steps {
			if st.ID == id {
				return countLeaves(st)
			}
			if n := find(st.Parallel); n > 0 {
				return n
			}
		}
		return 0
	}
	return find(plan.Steps)
}

func countLeaves(st *orchestrate.Step) int {
	if !st.IsGroup() {
		return 1
	}
	n := 0
	for _, c := range st.Parallel {
		n += countLeaves(c)
	}
	return n
}
