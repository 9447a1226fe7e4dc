package records

import (
	"context"
	"log/slog"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// Lessons keep the planner's lessons in the store, scoped like the
// records of runs: by owner, the caller that ran them, and its tenant.
type Lessons struct {
	st  *store.Store
	log *slog.Logger
}

// NewLessons returns the lessons kept in st.
func NewLessons(st *store.Store, log *slog.Logger) *Lessons {
	return &Lessons{st: st, log: log}
}

func callerOf(ctx context.Context) toolcontext.IDs {
	ids, _ := toolcontext.IDsFrom(ctx)
	return ids
}

// Recall implements planner.Lessons.
func (l *Lessons) Recall(ctx context.Context, tools []string, n int) []planner.Lesson {
	ids := callerOf(ctx)
	ins, err := l.st.Insights(ctx, store.InsightQuery{Scope: store.OwnerScope(ids.Owner).InTenant(ids.Tenant), Tools: tools, Limit: n})
	if err != nil {
		l.log.WarnContext(ctx, "reading insights", "err", err)
		return nil
	}
	out := make([]planner.Lesson, len(ins))
	for i, in := range ins {
		out[i] = planner.Lesson{Tool: in.Tool, Key: in.Key, Kind: in.Kind, Text: in.Lesson, Count: in.Count}
	}
	return out
}

// Learn implements planner.Lessons.
func (l *Lessons) Learn(ctx context.Context, ls []planner.Lesson) {
	l.record(ctx, callerOf(ctx), ls)
}

func (l *Lessons) record(ctx context.Context, ids toolcontext.IDs, ls []planner.Lesson) {
	if len(ls) == 0 {
		return
	}
	ins := make([]store.Insight, len(ls))
	for i, x := range ls {
		ins[i] = store.Insight{Owner: ids.Owner, Tenant: ids.Tenant, Tool: x.Tool, Key: x.Key, Kind: x.Kind, Lesson: x.Text}
	}
	if err := l.st.RecordInsights(ctx, ins...); err != nil {
		l.log.WarnContext(ctx, "recording insights", "err", err)
	}
}

// Hooks distil the lessons of each finished run — its tool errors, with
// their arguments, and its timeouts — into insights of its owner.
func (l *Lessons) Hooks() *orchestrate.Hooks {
	return &orchestrate.Hooks{RunFinished: func(i orchestrate.RunFinishedInfo) {
		ls := planner.LessonsOf(i.Envelope)
		if len(ls) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		l.record(ctx, i.Run.IDs, ls)
	}}
}
