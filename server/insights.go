package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// InsightsPage is the content of orchestra://insights: a page of insights.
type InsightsPage struct {
	Insights []store.Insight `json:"insights"`
	// Next is the URI of the next page; empty after the last.
	Next string `json:"next,omitempty"`
	// Cursor is the cursor of the next page (its URI's), for the CLI.
	Cursor string `json:"-"`
}

// DefaultInsightsPage is how many insights a page holds unless asked.
const DefaultInsightsPage = 100

// ReadInsightsPage reads the page of insights q selects from cursor (""
// for the first), limit of them (DefaultInsightsPage when 0).
func ReadInsightsPage(ctx context.Context, st *store.Store, q store.InsightQuery, cursor string, limit int) (InsightsPage, error) {
	if limit <= 0 {
		limit = DefaultInsightsPage
	}
	if cursor != "" {
		off, err := strconv.Atoi(cursor)
		if err != nil || off < 0 {
			return InsightsPage{}, fmt.Errorf("cursor %q is not one a page of insights gave", cursor)
		}
		q.Offset = off
	}
	// One more than the page tells whether another follows.
	q.Limit = limit + 1
	ins, err := st.Insights(ctx, q)
	if err != nil {
		return InsightsPage{}, err
	}
	page := InsightsPage{Insights: ins}
	if len(ins) > limit {
		page.Insights = ins[:limit]
		page.Cursor = strconv.Itoa(q.Offset + limit)
		v := url.Values{"cursor": {page.Cursor}, "limit": {strconv.Itoa(limit)}}
		if len(q.Tools) == 1 {
			v.Set("tool", q.Tools[0])
		}
		page.Next = InsightsURI + "?" + v.Encode()
	}
	return page, nil
}

// addInsightsResource serves orchestra://insights: the lessons learned from
// past runs, the most seen first, a page at a time. An authenticated
// caller reads its own.
func (a *App) addInsightsResource() {
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		q := store.InsightQuery{Scope: CallerScope(req.Extra)}
		var cursor string
		limit := DefaultInsightsPage
		if _, query, ok := strings.Cut(uri, "?"); ok {
			v, err := url.ParseQuery(query)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v", uri, err)}
			}
			cursor = v.Get("cursor")
			if t := v.Get("tool"); t != "" {
				q.Tools = []string{t}
			}
			if l := v.Get("limit"); l != "" {
				n, err := strconv.Atoi(l)
				if err != nil || n <= 0 || n > 1000 {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: limit must be a number from 1 to 1000", uri)}
				}
				limit = n
			}
		}
		page, err := ReadInsightsPage(ctx, a.store, q, cursor, limit)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v; start again from %s", uri, err, InsightsURI)}
		}
		return jsonResource(uri, page)
	}
	a.Server.AddResource(&mcp.Resource{
		URI:         InsightsURI,
		Name:        "insights",
		Title:       "Lessons from past runs",
		Description: "What past runs taught about each tool (validation errors a repair fixed, tool errors with their arguments, timeouts), the most seen first, " + strconv.Itoa(DefaultInsightsPage) + " a page; \"next\" is the URI of the next page. The planner is shown those of the tools it offers.",
		MIMEType:    "application/json",
	}, read)
	a.Server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: InsightsURI + "{?cursor,limit,tool}",
		Name:        "insights-page",
		Title:       "A page of lessons",
		Description: "A page of insights: cursor is the \"next\" of the page before, limit is at most 1000, tool keeps one tool's.",
		MIMEType:    "application/json",
	}, read)
}
