package server

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// InsightsURI is the MCP resource of the insights learned from past runs.
const InsightsURI = "orchestra://insights"

// lessons keeps the planner's lessons in the store, scoped like the
// records of runs: by owner, the caller that ran them, and its tenant.
type lessons struct {
	st  *store.Store
	log *slog.Logger
}

func callerOf(ctx context.Context) toolcontext.IDs {
	ids, _ := toolcontext.IDsFrom(ctx)
	return ids
}

// Recall implements planner.Lessons.
func (l *lessons) Recall(ctx context.Context, tools []string, n int) []planner.Lesson {
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
func (l *lessons) Learn(ctx context.Context, ls []planner.Lesson) {
	l.record(ctx, callerOf(ctx), ls)
}

func (l *lessons) record(ctx context.Context, ids toolcontext.IDs, ls []planner.Lesson) {
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

// hooks distil the lessons of each finished run — its tool errors, with
// their arguments, and its timeouts — into insights of its owner.
func (l *lessons) hooks() *orchestrate.Hooks {
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

// InsightsPage is the content of orchestra://insights.
type InsightsPage struct {
	Insights []store.Insight `json:"insights"`
}

// addInsightsResource serves orchestra://insights: the lessons learned from
// past runs, the most seen first. An authenticated caller reads its own.
func (a *App) addInsightsResource() {
	a.Server.AddResource(&mcp.Resource{
		URI:         InsightsURI,
		Name:        "insights",
		Title:       "Lessons from past runs",
		Description: "What past runs taught about each tool (validation errors a repair fixed, tool errors with their arguments, timeouts), the most seen first; the planner is shown those of the tools it offers.",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		ins, err := a.store.Insights(ctx, store.InsightQuery{Scope: CallerScope(req.Extra)})
		if err != nil {
			return nil, err
		}
		return jsonResource(req.Params.URI, InsightsPage{Insights: ins})
	})
}
