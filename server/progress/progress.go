package progress

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// Notifier sends the notifications/progress of one request whose caller
// sent a progress token.
//
// The rule: one notification when a step starts, and one when it ends,
// for tool steps, parallel groups, loops and iterations alike, at any depth. Every step ends,
// so a step that never started (skipped because the plan halted, timed
// out or was cancelled, or because a step it needs failed) sends one
// notification, its end. A plan with T tool steps and G groups sends
// 2(T+G) notifications when every step runs. Progress is the number of
// tool steps that ended, total the number of tool steps, so the last
// notification of a run reaches its total. A loop's tool steps count once
// its array resolved: the total grows (or shrinks, for an empty array) then. A downstream tool's own
// progress becomes another notification about its step, its fraction
// folded into the step's share; progress never goes backwards.
type Notifier struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any

	mu       sync.Mutex
	finished map[*orchestrate.RunInfo]int // tool steps ended, per run
	last     float64                      // the last progress sent
}

// For returns the notifier of a request, or nil when the caller sent no
// progress token.
func For(ctx context.Context, req *mcp.CallToolRequest) *Notifier {
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	return &Notifier{ctx: ctx, session: req.Session, token: tok, finished: map[*orchestrate.RunInfo]int{}}
}

// Hooks returns the engine hooks that send the notifications.
func (p *Notifier) Hooks() *orchestrate.Hooks {
	return &orchestrate.Hooks{
		StepStarted: func(i orchestrate.StepStartedInfo) {
			p.send(i.Run, label(i.Step)+": started", 0, false, false)
		},
		StepProgress: func(i orchestrate.StepProgressInfo) {
			pr := i.Progress
			msg := label(i.Step) + ": " + pr.Message
			if pr.Message == "" {
				msg = fmt.Sprintf("%s: %g", label(i.Step), pr.Progress)
			}
			var frac float64 // of the step's share
			if pr.Total > 0 {
				frac = min(max(pr.Progress/pr.Total, 0), 0.99)
			}
			p.send(i.Run, msg, frac, false, false)
		},
		StepEnded: func(i orchestrate.StepEndedInfo) {
			s := i.Step
			msg := fmt.Sprintf("%s: %s in %s", label(s), s.Status, (time.Duration(s.DurationMS) * time.Millisecond).String())
			if s.Error != nil {
				msg += " (" + string(s.Error.Code) + ")"
			}
			p.send(i.Run, msg, 0, true, s.Type != "parallel" && s.Type != orchestrate.TypeForEach)
		},
		RunFinished: func(i orchestrate.RunFinishedInfo) {
			p.mu.Lock()
			delete(p.finished, i.Run)
			p.mu.Unlock()
		},
		RunPaused: func(i orchestrate.RunPausedInfo) {
			p.mu.Lock()
			delete(p.finished, i.Run)
			p.mu.Unlock()
		},
	}
}

// label names a step in a notification.
func label(s *orchestrate.StepRecord) string {
	if s.Type == "parallel" {
		return "group " + s.ID
	}
	if s.Type == orchestrate.TypeForEach {
		return "loop " + s.ID
	}
	if s.Tool != "" {
		return "step " + s.ID + " (" + s.Tool + ")"
	}
	return "step " + s.ID
}

// send sends one notification about a step of run info; a tool step that
// ended counts towards the progress.
func (p *Notifier) send(info *orchestrate.RunInfo, msg string, frac float64, ended, tool bool) {
	p.mu.Lock()
	defer p.mu.Unlock() // in order: values sent never go backwards
	if ended && tool {
		p.finished[info]++
	}
	value := max(p.last, float64(p.finished[info])+frac)
	p.last = value
	_ = p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token, Progress: value, Total: float64(info.Steps()), Message: msg,
	})
}
