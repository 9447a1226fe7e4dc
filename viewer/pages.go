package viewer

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/timeline"
	"github.com/orchestra-mcp/orchestra/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pages are the parsed templates and the static files' version.
type pages struct {
	t       map[string]*template.Template // by page name
	version string                        // of the static files, for their URLs
}

// pageNames are the pages drawn in the layout; fragments are drawn alone.
var pageNames = []string{"runs", "run", "login", "insights", "tool", "error"}

func loadPages() (*pages, error) {
	h := sha256.New()
	err := fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := staticFiles.ReadFile(p)
		h.Write(data)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("viewer: reading the static files: %w", err)
	}
	ps := &pages{t: map[string]*template.Template{}, version: hex.EncodeToString(h.Sum(nil)[:6])}
	base, err := template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, fmt.Errorf("viewer: parsing templates: %w", err)
	}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFiles, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("viewer: parsing template %s: %w", name, err)
		}
		ps.t[name] = t
	}
	ps.t["parts"] = base
	return ps, nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"ms":  timeline.FormatMS,
	"px":  func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"kb": func(n int) string {
		if n < 10<<10 {
			return strconv.Itoa(n) + " bytes"
		}
		if n < 10<<20 {
			return strconv.Itoa(n>>10) + " KiB"
		}
		return strconv.Itoa(n>>20) + " MiB"
	},
}

// layout is what the layout draws around a page.
type layout struct {
	Title    string
	Prefix   string
	Version  string
	Who      string
	SignedIn bool // the viewer authenticates, and the caller signed in
	Page     any
}

// render draws page with data in the layout.
func (v *Viewer) render(w http.ResponseWriter, r *http.Request, status int, page string, data any, id Identity) {
	l := layout{Title: titles[page], Prefix: v.prefix, Version: v.pages.version, Who: id.Name,
		SignedIn: v.opts.Authenticate != nil && page != "login", Page: data}
	if t, ok := data.(interface{ title() string }); ok {
		l.Title = t.title()
	}
	v.write(w, r, status, v.pages.t[page], "layout", l)
}

var titles = map[string]string{"runs": "Runs", "login": "Sign in", "insights": "Insights", "error": "Problem"}

// write executes the template name of t into a buffer, then answers with
// it: a template error is a 500, never half a page.
func (v *Viewer) write(w http.ResponseWriter, r *http.Request, status int, t *template.Template, name string, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, data); err != nil {
		v.log.Error("viewer: drawing a page", "template", name, "path", r.URL.Path, "err", err)
		http.Error(w, "drawing the page failed; the server's log says why", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail answers with an error page that says what went wrong.
func (v *Viewer) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	id, _, _ := v.identify(r)
	v.render(w, r, status, "error", errorPage{Status: status, Message: msg}, id)
}

type errorPage struct {
	Status  int
	Message string
}

// readFailed answers a failed read: a run the caller does not see is not
// found, as if it did not exist.
func (v *Viewer) readFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		v.fail(w, r, http.StatusNotFound, "No "+what+" here: it does not exist, it was deleted by the retention policy, or it is not yours to see.")
	case errors.Is(err, store.ErrInvalidCursor):
		v.fail(w, r, http.StatusBadRequest, "The list's cursor is not one this viewer made: follow the list's own links.")
	case errors.Is(err, r.Context().Err()):
		// The browser went away.
	default:
		v.log.Error("viewer: reading records", "path", r.URL.Path, "err", err)
		v.fail(w, r, http.StatusServiceUnavailable, "Reading the records failed: "+err.Error())
	}
}

// static serves the embedded script and style sheet.
func (v *Viewer) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, err := staticFiles.ReadFile("static/" + name)
	if err != nil || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(data)
}

// runsRow is one run of the list.
type runsRow struct {
	ExecID, URL  string
	Status       string
	Goal         string // the prompt, or the first step
	IsGoal       bool
	Duration     string
	Steps        int
	Tokens       string
	Started      time.Time
	User, Tenant string
	Error        string
}

type runsPage struct {
	Query    listQuery
	Statuses []string
	Rows     []runsRow
	Next     string
	First    string // the first page's URL, on later pages
	Problem  string
}

func (v *Viewer) runsPage(w http.ResponseWriter, r *http.Request, id Identity) {
	lq, err := parseList(r.URL.Query())
	data := runsPage{Query: lq, Statuses: statuses}
	if err != nil {
		data.Problem = err.Error()
		v.render(w, r, http.StatusBadRequest, "runs", data, id)
		return
	}
	runs, next, err := v.opts.Records.List(r.Context(), lq.options(id.Scope))
	if err != nil {
		v.readFailed(w, r, "page of runs", err)
		return
	}
	now := v.now()
	for _, run := range runs {
		data.Rows = append(data.Rows, v.runsRow(&run, now))
	}
	if next != "" {
		q := lq.values()
		q.Set("cursor", next)
		data.Next = v.prefix + "?" + q.Encode()
	}
	if lq.Cursor != "" {
		data.First = v.prefix
		if q := lq.values().Encode(); q != "" {
			data.First += "?" + q
		}
	}
	v.render(w, r, http.StatusOK, "runs", data, id)
}

func (v *Viewer) runsRow(run *store.Run, now time.Time) runsRow {
	row := runsRow{ExecID: run.ExecID, URL: v.prefix + "runs/" + url.PathEscape(run.ExecID), Status: string(run.Status),
		Goal: run.Goal, IsGoal: run.Goal != "", Steps: run.StepCount, Started: run.StartedAt, User: run.UserID, Tenant: run.Tenant,
		Error: run.Error}
	if !row.IsGoal {
		row.Goal = run.FirstStep
	}
	row.Duration = runDuration(run, now)
	if run.TokensIn > 0 || run.TokensOut > 0 {
		row.Tokens = fmt.Sprintf("%d in · %d out", run.TokensIn, run.TokensOut)
	}
	return row
}

// runDuration says how long a run took, or has been running.
func runDuration(run *store.Run, now time.Time) string {
	switch {
	case run.Status == store.StatusRunning || run.Status == store.StatusPaused:
		return timeline.FormatMS(now.Sub(run.StartedAt).Milliseconds()) + " so far"
	case run.FinishedAt.IsZero():
		return ""
	}
	return timeline.FormatMS(run.DurationMS)
}
