package viewer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
	"github.com/orchestra-mcp/orchestra/viewer"
)

// tokens maps the handler tests' tokens to their holders.
var tokens = map[string]string{"alice-token": "alice", "bob-token": "bob"}

func authenticate(_ context.Context, token string) (viewer.Identity, error) {
	name, ok := tokens[token]
	if !ok {
		return viewer.Identity{}, errors.New("not a token of this test")
	}
	return viewer.Identity{Name: name, Scope: store.OwnerScope(name)}, nil
}

// both runs f on a SQLite store and a PostgreSQL one.
func both(t *testing.T, f func(t *testing.T, st *store.Store)) {
	for name, path := range map[string]func(testing.TB) string{
		"sqlite":   func(testing.TB) string { return store.Memory },
		"postgres": pgtest.URL,
	} {
		t.Run(name, func(t *testing.T) {
			st, err := store.Open(t.Context(), path(t), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			f(t, st)
		})
	}
}

// memStore opens a store in memory for the test.
func memStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Memory, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newViewer(t testing.TB, st *store.Store, auth bool) http.Handler {
	t.Helper()
	opts := viewer.Options{Records: st}
	if auth {
		opts.Authenticate = authenticate
	}
	v, err := viewer.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// get serves a GET of target with token (none when "").
func get(t testing.TB, h http.Handler, target, token string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// seed records a run of owner with one step, finished with status.
func seed(t testing.TB, st *store.Store, id, owner string, at time.Time, status store.Status, stepOutput string) {
	t.Helper()
	ctx := context.Background()
	if err := st.StartRun(ctx, store.Run{ExecID: id, Tool: "cli", Owner: owner, UserID: owner, StartedAt: at, StepCount: 1,
		FirstStep: "only (render)", Plan: json.RawMessage(`{"steps":[{"id":"only","tool":"render"}]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordStep(ctx, store.StepRecord{ExecID: id, StepID: "only", Path: "plan.steps[0]", Kind: "tool", Tool: "render",
		Status: "success", Attempts: 1, StartedAt: at, DurationMS: 5, Arguments: json.RawMessage(`{"template":"x"}`),
		Output: json.RawMessage(stepOutput)}); err != nil {
		t.Fatal(err)
	}
	if status != store.StatusRunning {
		if err := st.FinishRun(ctx, id, status, json.RawMessage(`{"artifact":{"status":"`+string(status)+`"}}`), at.Add(10*time.Millisecond), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestScopedReads: with authentication, each token reads only its
// owner's runs, on every page and part; another's run is not found; a
// caller without a credential is sent to sign in, or refused.
func TestScopedReads(t *testing.T) {
	both(t, func(t *testing.T, st *store.Store) {
		at := time.Now().Add(-time.Hour)
		seed(t, st, "alice-run", "alice", at, store.StatusSuccess, `{"text":"alice's secret"}`)
		seed(t, st, "bob-run", "bob", at.Add(time.Minute), store.StatusSuccess, `{"text":"bob's secret"}`)
		h := newViewer(t, st, true)

		list := get(t, h, "/ui/", "alice-token")
		if list.Code != http.StatusOK || !strings.Contains(list.Body.String(), `data-exec="alice-run"`) || strings.Contains(list.Body.String(), "bob-run") {
			t.Errorf("alice's list: %d\n%s", list.Code, list.Body)
		}
		for _, target := range []string{"/ui/runs/bob-run", "/ui/runs/bob-run/live", "/ui/runs/bob-run/step?id=only",
			"/ui/runs/bob-run/raw?part=output&step=only", "/ui/runs/bob-run/raw?part=plan"} {
			if rec := get(t, h, target, "alice-token"); rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "secret") {
				t.Errorf("alice reading %s: %d %s, want 404 without bob's records", target, rec.Code, rec.Body)
			}
		}
		if rec := get(t, h, "/ui/runs/alice-run/raw?part=output&step=only", "alice-token"); rec.Code != http.StatusOK ||
			rec.Body.String() != `{"text":"alice's secret"}` || rec.Header().Get("Content-Type") != "application/json; charset=utf-8" {
			t.Errorf("alice's whole output: %d %q %s", rec.Code, rec.Body, rec.Header().Get("Content-Type"))
		}
		if rec := get(t, h, "/ui/runs/alice-run/step?id=only", "alice-token"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "alice&#39;s secret") {
			t.Errorf("alice's step: %d\n%s", rec.Code, rec.Body)
		}

		// No credential: pages go to the login form (and back), parts are refused.
		rec := get(t, h, "/ui/runs/alice-run?step=only", "")
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || loc != "/ui/login?next="+url.QueryEscape("/ui/runs/alice-run?step=only") {
			t.Errorf("no credential: %d to %q, want 303 to the login form", rec.Code, loc)
		}
		if rec := get(t, h, "/ui/runs/alice-run/live", ""); rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("a part without a credential: %d, want 401 with WWW-Authenticate", rec.Code)
		}
		if rec := get(t, h, "/ui/runs/alice-run", "wrong-token"); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "not a token of this test") {
			t.Errorf("a wrong bearer token: %d %s, want 401 with the reason", rec.Code, rec.Body)
		}
	})
}

// TestLogin exchanges a token for a session cookie (HttpOnly,
// SameSite=Strict, Secure over TLS, scoped to the viewer), goes back only
// to the viewer's own pages, refuses a cross-site form, and signs out.
func TestLogin(t *testing.T) {
	st := memStore(t)
	seed(t, st, "alice-run", "alice", time.Now(), store.StatusSuccess, `{}`)
	h := newViewer(t, st, true)
	for _, tls := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(h)
		if tls {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		defer srv.Close()
		client := srv.Client()
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		post := func(form url.Values, header ...string) *http.Response {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for i := 0; i+1 < len(header); i += 2 {
				req.Header.Set(header[i], header[i+1])
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp
		}

		resp := post(url.Values{"token": {"alice-token"}, "next": {"/ui/runs/alice-run"}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/runs/alice-run" {
			t.Fatalf("tls %v: sign-in: %d to %q", tls, resp.StatusCode, resp.Header.Get("Location"))
		}
		cookies := resp.Cookies()
		if len(cookies) != 1 {
			t.Fatalf("tls %v: %d cookies set", tls, len(cookies))
		}
		c := cookies[0]
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tls || c.Path != "/ui/" || strings.Contains(c.Value, "alice") {
			t.Errorf("tls %v: the session cookie is %+v; want HttpOnly, SameSite=Strict, Secure only over TLS, Path /ui/, no token", tls, c)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/", nil)
		req.AddCookie(c)
		page, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(page.Body)
		page.Body.Close()
		if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "alice-run") || !strings.Contains(string(body), `<span id="who">alice</span>`) {
			t.Errorf("tls %v: the list with the cookie: %d\n%s", tls, page.StatusCode, body)
		}

		for _, next := range []string{"https://elsewhere.example/", "//elsewhere.example/ui/", "/other", "/ui/\\evil", strings.Repeat("/ui/x", 300)} {
			if loc := post(url.Values{"token": {"alice-token"}, "next": {next}}).Header.Get("Location"); loc != "/ui/" {
				t.Errorf("tls %v: next %q sent the browser to %q, want /ui/", tls, next, loc)
			}
		}
		if resp := post(url.Values{"token": {"alice-token"}}, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("tls %v: a cross-site sign-in: %d, want 403", tls, resp.StatusCode)
		}
		if resp := post(url.Values{"token": {"nope"}}); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("tls %v: a wrong token: %d with %d cookies, want 401 and none", tls, resp.StatusCode, len(resp.Cookies()))
		}
		if resp := post(url.Values{"token": {strings.Repeat("x", 9000)}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("tls %v: a 9,000-byte token: %d, want 400", tls, resp.StatusCode)
		}
		if resp := post(url.Values{"token": {strings.Repeat("x", 20000)}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("tls %v: a 20,000-byte form: %d, want 400", tls, resp.StatusCode)
		}

		out, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/logout", nil)
		out.AddCookie(c)
		if resp, err := client.Do(out); err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("tls %v: sign-out: %v %v", tls, resp, err)
		}
		again, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/", nil)
		again.AddCookie(c)
		if resp, err := client.Do(again); err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Errorf("tls %v: the cookie after sign-out: %v %v, want a redirect to the form", tls, resp.StatusCode, err)
		}
	}
}

// TestBoundedInputs refuses each of the viewer's own inputs beyond its
// bound with a message that says what was wrong.
func TestBoundedInputs(t *testing.T) {
	st := memStore(t)
	h := newViewer(t, st, false)
	for target, want := range map[string]string{
		"/ui/?q=" + strings.Repeat("x", 257):             "at most 256 bytes",
		"/ui/?status=done":                               "is not one of running",
		"/ui/?limit=0":                                   "from 1 to 200",
		"/ui/?limit=201":                                 "from 1 to 200",
		"/ui/?since=yesterday":                           "is not a date",
		"/ui/?since=2026-01-02&until=2026-01-01":         "must be later than since",
		"/ui/?cursor=" + strings.Repeat("c", 200):        "follow the list",
		"/ui/?cursor=r1.bm90IGEgY3Vyc29y":                "cursor is not one this viewer made",
		"/ui/runs/" + strings.Repeat("i", 129):           "1 to 128 bytes",
		"/ui/runs/x%01y":                                 "character it cannot have",
		"/ui/runs/x/step?id=":                            "give it as ?id=STEP",
		"/ui/runs/x/raw?part=secrets":                    "is not one of plan",
		"/ui/insights/" + strings.Repeat("t", 257):       "1 to 256 bytes",
		"/ui/?q=" + strings.Repeat("%25", 2000):          "query string is",
		"/ui/runs/x/step?id=" + strings.Repeat("s", 257): "1 to 256 bytes",
	} {
		rec := get(t, h, target, "")
		if rec.Code < 400 || rec.Code >= 500 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %.60s: %d, want a 4xx saying %q; got\n%.300s", target, rec.Code, want, rec.Body)
		}
	}
	if rec := get(t, h, "/ui/runs/x", "", "Authorization", ""); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown run: %d, want 404", rec.Code)
	}
	req := httptest.NewRequest(http.MethodDelete, "/ui/runs/x", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d, want 405", rec.Code)
	}
}

// TestNoInlineCode: every page sets the Content-Security-Policy and holds
// no inline script, style or event handler, which it would block.
func TestNoInlineCode(t *testing.T) {
	st := memStore(t)
	seed(t, st, "r", "", time.Now(), store.StatusSuccess, `{"x":1}`)
	if err := st.RecordInsights(t.Context(), store.Insight{Tool: "render", Key: "k", Kind: "tool_error", Lesson: "be careful"}); err != nil {
		t.Fatal(err)
	}
	h := newViewer(t, st, true)
	inline := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<style|\sstyle=|\son[a-z]+=|javascript:`)
	for _, target := range []string{"/ui/", "/ui/runs/r", "/ui/runs/r?step=only", "/ui/runs/r/live", "/ui/runs/r/step?id=only", "/ui/insights", "/ui/insights/render", "/ui/login", "/ui/nowhere"} {
		rec := get(t, h, target, "alice-token")
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: CSP %q", target, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", target, rec.Header())
		}
		if m := inline.FindString(rec.Body.String()); m != "" {
			t.Errorf("%s holds inline code %q", target, m)
		}
	}
	for file, ctype := range map[string]string{"viewer.js": "text/javascript; charset=utf-8", "viewer.css": "text/css; charset=utf-8"} {
		if rec := get(t, h, "/ui/static/"+file, ""); rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != ctype || rec.Body.Len() < 100 {
			t.Errorf("%s: %d %s, %d bytes", file, rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
		}
	}
}

// TestRebinding: without authentication, a request that reached a
// loopback listener under a name that is not loopback's, as a page's
// script does through DNS rebinding, is refused, and one under localhost
// served; with authentication (a page there holds no credential) a
// reverse proxy's host name is served.
func TestRebinding(t *testing.T) {
	st := memStore(t)
	for _, auth := range []bool{false, true} {
		srv := httptest.NewServer(newViewer(t, st, auth))
		defer srv.Close()
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		foreign := http.StatusForbidden
		if auth {
			foreign = http.StatusOK
		}
		for host, want := range map[string]int{"attacker.example:" + port: foreign, "localhost:" + port: http.StatusOK, "127.0.0.1:" + port: http.StatusOK} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/login", nil)
			req.Host = host
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want && !(want == http.StatusOK && resp.StatusCode == http.StatusSeeOther) {
				t.Errorf("auth %v, Host %s: %d, want %d", auth, host, resp.StatusCode, want)
			}
		}
	}
}

// TestListPagesAndFilters pages through runs newest first with the
// filters kept, and filters by status, text and time.
func TestListPagesAndFilters(t *testing.T) {
	both(t, func(t *testing.T, st *store.Store) {
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		for i := range 5 {
			status := store.StatusSuccess
			if i == 3 {
				status = store.StatusFailed
			}
			seed(t, st, fmt.Sprintf("run-%d", i), "", t0.Add(time.Duration(i)*time.Hour), status, `{}`)
		}
		h := newViewer(t, st, false)
		ids := func(body string) []string {
			var out []string
			for _, m := range regexp.MustCompile(`data-exec="([^"]+)"`).FindAllStringSubmatch(body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		first := get(t, h, "/ui/?limit=2&q=run", "").Body.String()
		if got := ids(first); fmt.Sprint(got) != "[run-4 run-3]" {
			t.Fatalf("first page %v, want [run-4 run-3]", got)
		}
		next := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(first)
		if next == nil {
			t.Fatal("no Older link")
		}
		second := get(t, h, strings.ReplaceAll(next[1], "&amp;", "&"), "").Body.String()
		if got := ids(second); fmt.Sprint(got) != "[run-2 run-1]" {
			t.Errorf("second page %v, want [run-2 run-1]", got)
		}
		for q, want := range map[string]string{
			"status=failed": "[run-3]",
			"q=RUN-2":       "[run-2]",
			"since=2026-03-01T14:00&until=2026-03-01T16:00": "[run-3 run-2]",
			"since=2026-03-02": "[]",
		} {
			if got := ids(get(t, h, "/ui/?"+q, "").Body.String()); fmt.Sprint(got) != want {
				t.Errorf("?%s lists %v, want %s", q, got, want)
			}
		}
	})
}

// TestPausedRunAndInsights: a paused run's page shows the calls it waits
// for; the insights about its tools show on its page and on the tool's,
// to their owner only.
func TestPausedRunAndInsights(t *testing.T) {
	both(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		at := time.Now().Add(-time.Minute)
		seed(t, st, "paused-run", "alice", at, store.StatusRunning, `{}`)
		pending := `[{"call_id":"call-7","step":"approve","tool":"ask_manager","arguments":{"amount":"<b>1200</b>"}}]`
		if err := st.Pause(ctx, "paused-run", json.RawMessage(`{"plan":{}}`), json.RawMessage(pending), nil, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := st.RecordInsights(ctx, store.Insight{Owner: "alice", Tool: "render", Key: "k", Kind: "tool_error", Lesson: "render needs a <template>"}); err != nil {
			t.Fatal(err)
		}
		h := newViewer(t, st, true)
		page := get(t, h, "/ui/runs/paused-run", "alice-token").Body.String()
		for _, want := range []string{`data-status="paused"`, "Waiting for the client", "ask_manager", "call-7", "&lt;b&gt;1200&lt;/b&gt;", `class="pause"`,
			"render needs a &lt;template&gt;", `data-live="1"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the paused run's page lacks %q", want)
			}
		}
		if rec := get(t, h, "/ui/insights", "alice-token"); !strings.Contains(rec.Body.String(), `href="/ui/insights/render"`) {
			t.Errorf("alice's insights page:\n%s", rec.Body)
		}
		if rec := get(t, h, "/ui/insights/render", "alice-token"); !strings.Contains(rec.Body.String(), "render needs a &lt;template&gt;") {
			t.Errorf("the render tool's page:\n%s", rec.Body)
		}
		for _, target := range []string{"/ui/insights", "/ui/insights/render"} {
			if rec := get(t, h, target, "bob-token"); strings.Contains(rec.Body.String(), "render needs") {
				t.Errorf("bob sees alice's insights at %s", target)
			}
		}
	})
}

// TestLiveETag answers a poll of a run that did not move with 304, and
// one that moved with its new part.
func TestLiveETag(t *testing.T) {
	st := memStore(t)
	now := time.Now()
	seed(t, st, "r", "", now.Add(-time.Second), store.StatusSuccess, `{}`)
	h := newViewer(t, st, false)
	first := get(t, h, "/ui/runs/r/live", "")
	etag := first.Header().Get("ETag")
	if first.Code != http.StatusOK || etag == "" || !strings.Contains(first.Body.String(), `id="gantt"`) {
		t.Fatalf("the live part: %d, ETag %q", first.Code, etag)
	}
	if rec := get(t, h, "/ui/runs/r/live", "", "If-None-Match", etag); rec.Code != http.StatusNotModified {
		t.Errorf("an unchanged run: %d, want 304", rec.Code)
	}
	if err := st.UpdateEnvelope(t.Context(), "r", json.RawMessage(`{"artifact":{"status":"success","answer":"moved"}}`)); err != nil {
		t.Fatal(err)
	}
	if rec := get(t, h, "/ui/runs/r/live", "", "If-None-Match", etag); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "moved") {
		t.Errorf("a changed run: %d, want its new part", rec.Code)
	}
}

// BenchmarkRunPage draws the page of a run of 1,000 steps, server side.
func BenchmarkRunPage(b *testing.B) {
	st := memStore(b)
	ctx := b.Context()
	start := time.Now().Add(-time.Hour)
	if err := st.StartRun(ctx, store.Run{ExecID: "large", Tool: "cli", StartedAt: start, StepCount: 1000}); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if err := st.QueueRecordStep(ctx, store.StepRecord{ExecID: "large", StepID: fmt.Sprintf("s%d", i), Index: i, Path: fmt.Sprintf("plan.steps[%d]", i),
			Kind: "tool", Tool: "sleep", Status: "success", Attempts: 1, StartedAt: start.Add(time.Duration(i) * 50 * time.Millisecond), DurationMS: 40,
			Output: json.RawMessage(`{"label":"x"}`)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.FinishRun(ctx, "large", store.StatusSuccess, json.RawMessage(`{}`), start.Add(time.Minute), 0); err != nil {
		b.Fatal(err)
	}
	h := newViewer(b, st, false)
	b.ReportAllocs()
	for b.Loop() {
		if rec := get(b, h, "/ui/runs/large", ""); rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}
