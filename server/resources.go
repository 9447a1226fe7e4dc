package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/server/tenancy"
	"github.com/orchestra-mcp/orchestra/store"
)

// ExecutionsURI is the MCP resource that lists execution records, newest
// first; RecordURI names one record.
const ExecutionsURI = "orchestra://executions"

// RecordURI is the MCP resource of the execution record of run execID.
func RecordURI(execID string) string { return ExecutionsURI + "/" + execID }

// InsightsURI is the MCP resource of the insights learned from past runs.
const InsightsURI = "orchestra://insights"

// defaultPage is how many runs a page of orchestra://executions lists.
const defaultPage = 20

// addResources serves the execution records as MCP resources:
// orchestra://executions lists recent runs, newest first, a page at a time
// (orchestra://executions?cursor=...&limit=...&status=... for the others),
// and orchestra://executions/{exec_id} is one run's envelope and steps. An
// authenticated caller reads only the runs it started (tenancy.CallerScope).
func (a *App) addResources() {
	a.Server.AddResource(&mcp.Resource{
		URI:         ExecutionsURI,
		Name:        "executions",
		Title:       "Recent orchestrations",
		Description: "The execution records of recent agent_orchestrate runs, newest first, " + strconv.Itoa(defaultPage) + " a page; \"next\" is the URI of the next page. Read orchestra://executions/{exec_id} for one run's envelope and steps.",
		MIMEType:    "application/json",
	}, a.readExecutions)
	a.Server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: ExecutionsURI + "{?cursor,limit,status}",
		Name:        "executions-page",
		Title:       "A page of orchestrations",
		Description: "A page of execution records: cursor is the \"next\" of the page before, limit is at most 1000, status filters (running, paused, success, failed, partial, interrupted, cancelled).",
		MIMEType:    "application/json",
	}, a.readExecutions)
	a.Server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: ExecutionsURI + "/{exec_id}",
		Name:        "execution",
		Title:       "One orchestration",
		Description: "The execution record of one run: its status, the result envelope agent_orchestrate returned (its _metadata.record names this URI), and each step's record.",
		MIMEType:    "application/json",
	}, a.readExecution)
}

// ExecutionSummary is one run in a page of orchestra://executions.
type ExecutionSummary struct {
	ExecID     string     `json:"exec_id"`
	URI        string     `json:"uri"`
	Status     string     `json:"status"`
	Tool       string     `json:"tool"`
	RequestID  string     `json:"request_id,omitempty"`
	UserID     string     `json:"user_id,omitempty"`
	Tenant     string     `json:"tenant,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMS int64      `json:"duration_ms"`
	Steps      int        `json:"steps"`
	Error      string     `json:"error,omitempty"`
	// Parent is the record of the run that started this one, if any.
	Parent string `json:"parent,omitempty"`
	// ParentExecID is that run's exec id.
	ParentExecID string `json:"parent_exec_id,omitempty"`
	// Resumable reports that the run can go on: it is paused, or it was
	// interrupted or failed (orchestra resume ID).
	Resumable bool `json:"resumable,omitempty"`
}

// ExecutionPage is the content of orchestra://executions.
type ExecutionPage struct {
	Executions []ExecutionSummary `json:"executions"`
	// Next is the URI of the next page; empty after the last.
	Next string `json:"next,omitempty"`
}

// Execution is the content of orchestra://executions/{exec_id}.
type Execution struct {
	ExecutionSummary
	Plan     json.RawMessage `json:"plan,omitempty"`
	Envelope json.RawMessage `json:"envelope,omitempty"`
	Records  []StepSummary   `json:"step_records"`
	// Pauses is the run's history of pauses and resumes, oldest first.
	Pauses []store.PauseEvent `json:"pauses,omitempty"`
}

// StepSummary is the record of one step.
type StepSummary struct {
	StepID     string          `json:"step_id"`
	Index      int             `json:"index"`
	Path       string          `json:"path"`
	Tool       string          `json:"tool,omitempty"`
	Status     string          `json:"status"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	DurationMS int64           `json:"duration_ms"`
	Attempts   int             `json:"attempts"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      json.RawMessage `json:"error,omitempty"`
}

// Summary describes a run without its bodies.
func Summary(r *store.Run) ExecutionSummary {
	s := ExecutionSummary{
		ExecID: r.ExecID, URI: RecordURI(r.ExecID), Status: string(r.Status), Tool: r.Tool, RequestID: r.RequestID,
		UserID: r.UserID, Tenant: r.Tenant,
		StartedAt: r.StartedAt, DurationMS: r.DurationMS, Steps: r.StepCount, Error: r.Error, Resumable: r.Resumable,
	}
	if r.ParentExecID != "" {
		s.ParentExecID, s.Parent = r.ParentExecID, RecordURI(r.ParentExecID)
	}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt
		s.FinishedAt = &t
	}
	return s
}

// ExecutionOf makes the content of a run's resource.
func ExecutionOf(r *store.Run, steps []store.StepRecord) Execution {
	e := Execution{ExecutionSummary: Summary(r), Plan: r.Plan, Envelope: r.Envelope, Records: []StepSummary{}}
	for _, st := range steps {
		ss := StepSummary{StepID: st.StepID, Index: st.Index, Path: st.Path, Tool: st.Tool, Status: st.Status,
			DurationMS: st.DurationMS, Attempts: st.Attempts, Output: st.Output, Error: st.Error}
		if !st.StartedAt.IsZero() {
			t := st.StartedAt
			ss.StartedAt = &t
		}
		e.Records = append(e.Records, ss)
	}
	return e
}

// ListPage reads one page of runs; next is the cursor of the page after.
func ListPage(ctx context.Context, st *store.Store, opts store.ListOptions) (ExecutionPage, error) {
	runs, next, err := st.List(ctx, opts)
	if err != nil {
		return ExecutionPage{}, err
	}
	page := ExecutionPage{Executions: []ExecutionSummary{}}
	for i := range runs {
		page.Executions = append(page.Executions, Summary(&runs[i]))
	}
	if next != "" {
		q := url.Values{"cursor": {next}}
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
		if opts.Status != "" {
			q.Set("status", string(opts.Status))
		}
		page.Next = ExecutionsURI + "?" + q.Encode()
	}
	return page, nil
}

func (a *App) readExecutions(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	opts := store.ListOptions{Limit: defaultPage, Scope: tenancy.CallerScope(req.Extra)}
	if _, query, ok := strings.Cut(uri, "?"); ok {
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v", uri, err)}
		}
		opts.Cursor = q.Get("cursor")
		opts.Status = store.Status(q.Get("status"))
		if l := q.Get("limit"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil || n <= 0 {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: limit must be a positive number", uri)}
			}
			opts.Limit = n
		}
	}
	page, err := ListPage(ctx, a.store, opts)
	if err != nil {
		if errors.Is(err, store.ErrInvalidCursor) || strings.Contains(err.Error(), "unknown status") {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("%s: %v; start again from %s", uri, err, ExecutionsURI)}
		}
		return nil, err
	}
	return jsonResource(uri, page)
}

// maxExecIDBytes bounds an exec id in a URI: ids orchestra makes are 36
// bytes; a longer one names no run and is not looked up.
const maxExecIDBytes = 128

// quotedURI is uri as an error quotes it: its first 256 bytes, so that an
// answer never echoes a caller's megabytes back.
func quotedURI(uri string) string {
	if len(uri) <= 256 {
		return uri
	}
	return strings.ToValidUTF8(uri[:256], "") + fmt.Sprintf("… (%d bytes)", len(uri))
}

func (a *App) readExecution(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, err := url.PathUnescape(strings.TrimPrefix(uri, ExecutionsURI+"/"))
	if err != nil || id == "" || len(id) > maxExecIDBytes {
		return nil, mcp.ResourceNotFoundError(quotedURI(uri))
	}
	run, steps, err := a.store.GetIn(ctx, tenancy.CallerScope(req.Extra), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(quotedURI(uri))
	}
	if err != nil {
		return nil, err
	}
	ex := ExecutionOf(run, steps)
	ex.Pauses, _ = a.store.Pauses(ctx, id)
	return jsonResource(uri, ex)
}

func jsonResource(uri string, v any) (*mcp.ReadResourceResult, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}}, nil
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
		q := store.InsightQuery{Scope: tenancy.CallerScope(req.Extra)}
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
