package viewer_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

var update = flag.Bool("update", false, "rewrite the viewer's screenshots in docs/ (viewer-runs.png, viewer-run.png)")

func TestMain(m *testing.M) {
	builtin.ServeWorker() // the app's json_query and friends evaluate in copies of the test binary
	code := m.Run()
	stopBrowser()
	pgtest.Stop()
	os.Exit(code)
}

// The tokens of the two owners the browser tests sign in as.
const (
	aliceToken = "alice-viewer-token-0123456789"
	bobToken   = "bob-viewer-token-9876543210"
)

// viewerServer is orchestra serving Streamable HTTP and the viewer, as
// serve --http does, with alice's and bob's named tokens, test tools, and
// an agent whose model is scripted.
type viewerServer struct {
	app   *server.App
	srv   *httptest.Server
	store *store.Store
}

// counterScript is the scripted model of the counter agent: one turn that
// calls the sleep tool, then the answer.
const counterScript = `{"tool_calls": [{"id": "c1", "name": "sleep", "arguments": {"ms": 50, "label": "agent"}}], "usage": {"input_tokens": 120, "output_tokens": 20}}
{"text": "3", "usage": {"input_tokens": 150, "output_tokens": 5}}
`

func startViewerServer(t *testing.T, tools ...registry.Tool) *viewerServer {
	t.Helper()
	t.Setenv("VIEWER_ALICE_TOKEN", aliceToken)
	t.Setenv("VIEWER_BOB_TOKEN", bobToken)
	dir := t.TempDir()
	script := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(script, []byte(counterScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Server.Auth = config.Auth{Tokens: []config.NamedToken{
		{Name: "alice", TokenEnv: "VIEWER_ALICE_TOKEN"},
		{Name: "bob", TokenEnv: "VIEWER_BOB_TOKEN"},
	}}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderScripted, Script: script}}
	cfg.Agents = map[string]agents.Config{"counter": {
		Description: "Counts things with the sleep tool's help.", Instructions: "Count.", Tools: []string{"sleep"}, MaxToolSteps: 2,
	}}
	app, err := server.New(t.Context(), cfg, server.Options{Store: filepath.Join(dir, "orchestra.db"), Tools: append(tools, sleepTool(t))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	return &viewerServer{app: app, srv: srv, store: app.Store()}
}

// bearerTransport sends a bearer token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// client connects an MCP client holding token.
func (vs *viewerServer) client(t *testing.T, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: vs.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "viewer-test"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// runPlan runs plan through agent_orchestrate and returns the run's exec id.
func runPlan(t *testing.T, cs *mcp.ClientSession, plan string) string {
	t.Helper()
	var p any
	if err := json.Unmarshal([]byte(plan), &p); err != nil {
		t.Fatalf("plan %s: %v", plan, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: map[string]any{"plan": p, "response": "full"}})
	if err != nil {
		t.Errorf("calling agent_orchestrate: %v", err)
		return ""
	}
	data, _ := json.Marshal(res.StructuredContent)
	var env orchestrate.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.Metadata.ExecID == "" {
		t.Errorf("no exec id in the envelope (%v): %s", err, data)
	}
	return env.Metadata.ExecID
}

func mustSchema(t testing.TB, s string) *jsonschema.Schema {
	t.Helper()
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return &sc
}

// sleepTool waits ms milliseconds (or until cancelled) and answers with its label.
func sleepTool(t testing.TB) registry.Tool {
	return registry.Tool{
		Name: "sleep", Description: "Waits ms milliseconds and echoes its label. A test tool.", Source: "test",
		InputSchema:  mustSchema(t, `{"type":"object","properties":{"ms":{"type":"integer"},"label":{"type":"string"}},"required":["ms"]}`),
		OutputSchema: mustSchema(t, `{"type":"object","properties":{"label":{"type":"string"}}}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			ms, _ := req.Arguments["ms"].(float64)
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &registry.Result{Structured: map[string]any{"label": req.Arguments["label"]}}, nil
		},
	}
}

// gateTool blocks until open is closed; started says a call began.
func gateTool(t testing.TB, open <-chan struct{}, started chan<- struct{}) registry.Tool {
	return registry.Tool{
		Name: "gate", Description: "Waits until the test opens it. A test tool.", Source: "test",
		InputSchema: mustSchema(t, `{"type":"object"}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			started <- struct{}{}
			select {
			case <-open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &registry.Result{Structured: map[string]any{"opened": true}}, nil
		},
	}
}

// signIn signs tab in through the login form with token, from the runs
// list it was sent away from.
func signIn(t *testing.T, tab context.Context, base, token string) {
	t.Helper()
	do(t, tab, "opening the runs list", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if path := eval[string](t, tab, "location.pathname"); path != "/ui/login" {
		t.Fatalf("without a session the list sent the browser to %s, want /ui/login", path)
	}
	do(t, tab, "signing in",
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("#who")))
	if href := eval[string](t, tab, "location.href"); strings.Contains(href, token) {
		t.Errorf("the token appears in the URL %s", href)
	}
	if c := eval[string](t, tab, "document.cookie"); strings.Contains(c, "orchestra_session") {
		t.Errorf("a script can read the session cookie: %q", c)
	}
}

// listedRuns returns the exec ids the runs list shows.
func listedRuns(t *testing.T, tab context.Context) []string {
	t.Helper()
	ids := eval[[]string](t, tab, `Array.from(document.querySelectorAll('#runs tbody tr')).map(tr => tr.dataset.exec)`)
	slices.Sort(ids)
	return ids
}

// TestBrowserOwners: two owners sign in through the form, each in a
// browser of their own, and each sees only their own runs; a run of the
// other is not found.
func TestBrowserOwners(t *testing.T) {
	b := theBrowser(t)
	vs := startViewerServer(t)
	alice, bob := vs.client(t, aliceToken), vs.client(t, bobToken)
	aliceRuns := []string{
		runPlan(t, alice, `{"steps":[{"id":"alice_first","tool":"sleep","arguments":{"ms":1,"label":"a"}}]}`),
		runPlan(t, alice, `{"steps":[{"id":"alice_second","tool":"sleep","arguments":{"ms":1,"label":"a"}}]}`),
	}
	bobRuns := []string{runPlan(t, bob, `{"steps":[{"id":"bob_only","tool":"sleep","arguments":{"ms":1,"label":"b"}}]}`)}
	slices.Sort(aliceRuns)

	for _, who := range []struct {
		name, token string
		own, other  []string
	}{
		{"alice", aliceToken, aliceRuns, bobRuns},
		{"bob", bobToken, bobRuns, aliceRuns},
	} {
		t.Run(who.name, func(t *testing.T) {
			tab := b.tab(t)
			signIn(t, tab, vs.srv.URL, who.token)
			if got := eval[string](t, tab, "document.getElementById('who').textContent"); got != who.name {
				t.Errorf("the header names %q, want %q", got, who.name)
			}
			if got := listedRuns(t, tab); !slices.Equal(got, who.own) {
				t.Errorf("%s's list shows %v, want exactly their runs %v", who.name, got, who.own)
			}
			do(t, tab, "opening the other's run", chromedp.Navigate(vs.srv.URL+"/ui/runs/"+who.other[0]), chromedp.WaitVisible(chromedp.CSS("#problem")))
			if h := eval[string](t, tab, "document.querySelector('h1').textContent"); h != "404" {
				t.Errorf("%s opening another's run got %q, want 404", who.name, h)
			}
		})
	}

	// A browser that never signed in is sent to the form, and a wrong
	// token is refused there.
	tab := b.tab(t)
	do(t, tab, "signing in with a wrong token", chromedp.Navigate(vs.srv.URL+"/ui/runs/"+aliceRuns[0]), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS("#signin")), chromedp.WaitVisible(chromedp.CSS("#problem")))
	if msg := eval[string](t, tab, "document.getElementById('problem').textContent"); !strings.Contains(msg, "refused") {
		t.Errorf("a wrong token: %q, want it refused", msg)
	}
}

// timelinePlan has a parallel group, a loop, an agent whose scripted
// model calls a tool, a failing step the plan goes past, and a step whose
// output is markup.
const timelinePlan = `{"steps":[
	{"id":"warm","tool":"sleep","arguments":{"ms":60,"label":"warm"}},
	{"id":"fan","parallel":[
		{"id":"left","tool":"sleep","arguments":{"ms":150,"label":"left"}},
		{"id":"right","tool":"sleep","arguments":{"ms":40,"label":"right"}}]},
	{"id":"each","for_each":["a","b","c"],"as":"item","max_concurrency":1,
		"do":{"id":"tick","tool":"sleep","arguments":{"ms":30,"label":"$item"}}},
	{"id":"count","agent":"counter","prompt":"How many items?","with":{"list":[1,2,3]}},
	{"id":"broken","tool":"json_query","arguments":{"query":"error(\"the upstream said no\")","input":1},"on_error":"continue"},
	{"id":"markup","tool":"render","arguments":{"template":"<script>window.__pwned = 1</script><b id=\"bold\">bold?</b>"}}
]}`

// barBox is a bar's horizontal extent in the page, as the DOM lays it out.
type barBox struct {
	Run   string  `json:"run"`
	Step  string  `json:"step"`
	Left  float64 `json:"left"`
	Width float64 `json:"width"`
}

// readBars returns the plot's extent and every bar's, from the DOM.
func readBars(t *testing.T, tab context.Context) (plotLeft, plotWidth float64, bars []barBox) {
	t.Helper()
	var got struct {
		Left  float64  `json:"left"`
		Width float64  `json:"width"`
		Bars  []barBox `json:"bars"`
	}
	got = eval[struct {
		Left  float64  `json:"left"`
		Width float64  `json:"width"`
		Bars  []barBox `json:"bars"`
	}](t, tab, `(() => {
		const plot = document.getElementById('plot').getBoundingClientRect();
		const bars = Array.from(document.querySelectorAll('#gantt g.row')).flatMap(g => {
			const r = g.querySelector('rect.bar');
			if (!r) return [];
			const b = r.getBoundingClientRect();
			return [{run: g.dataset.run, step: g.dataset.step, left: b.left, width: b.width}];
		});
		return {left: plot.left, width: plot.width, bars};
	})()`)
	return got.Left, got.Width, got.Bars
}

// recorded is a step as the store recorded it, with the run it is in.
type recorded struct {
	run  string
	step store.StepRecord
}

// readRecords reads run execID's steps and those of the runs it started,
// and where its time axis ends: the latest end of the run, its steps and
// theirs.
func readRecords(t *testing.T, st *store.Store, execID string) (start, end time.Time, steps []recorded, children []*store.Run) {
	t.Helper()
	ctx := t.Context()
	var walk func(id string)
	walk = func(id string) {
		run, recs, err := st.OutlineIn(ctx, store.Scope{}, id)
		if err != nil {
			t.Fatal(err)
		}
		if id == execID {
			start = run.StartedAt
		} else {
			children = append(children, run)
		}
		if run.FinishedAt.After(end) {
			end = run.FinishedAt
		}
		for _, r := range recs {
			steps = append(steps, recorded{id, r})
			if e := r.StartedAt.Add(time.Duration(r.DurationMS) * time.Millisecond); !r.StartedAt.IsZero() && e.After(end) {
				end = e
			}
		}
		kids, _, err := st.List(ctx, store.ListOptions{Parent: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			walk(k.ExecID)
		}
	}
	walk(execID)
	return start, end, steps, children
}

// TestBrowserTimeline runs a plan with a parallel group, a loop and an
// agent, and reads the chart from the DOM: every bar's horizontal extent
// matches its step's recorded start and duration on a time axis from the
// run's start to its end, within a pixel; the group's children overlap,
// the loop's iterations follow each other, the agent's model turns and
// tool call are drawn under its step. Clicking the failing step shows its
// error; the step whose output is markup shows it as text.
func TestBrowserTimeline(t *testing.T) {
	b := theBrowser(t)
	vs := startViewerServer(t)
	alice := vs.client(t, aliceToken)
	execID := runPlan(t, alice, timelinePlan)
	if execID == "" {
		t.FailNow()
	}
	tab := b.tab(t)
	signIn(t, tab, vs.srv.URL, aliceToken)
	do(t, tab, "opening the run", chromedp.Navigate(vs.srv.URL+"/ui/runs/"+execID), chromedp.WaitVisible(chromedp.CSS("#gantt")))

	// The agent's model tokens (the script's usage) are the run's.
	if head := eval[string](t, tab, "document.getElementById('run-head').textContent"); !strings.Contains(head, "270 in · 25 out") {
		t.Errorf("the run's facts do not show the agent's tokens, 270 in · 25 out:\n%s", head)
	}
	start, end, steps, children := readRecords(t, vs.store, execID)
	if len(children) != 1 || children[0].Tool != "agent__counter" {
		t.Fatalf("the run started %d runs (%v), want the counter agent's", len(children), children)
	}
	span := float64(end.Sub(start))
	plotLeft, plotWidth, bars := readBars(t, tab)
	byKey := map[string]barBox{}
	for _, bb := range bars {
		byKey[bb.Run+"/"+bb.Step] = bb
	}
	const tolerance = 1.5 // pixels
	for _, r := range steps {
		bb, ok := byKey[r.run+"/"+r.step.StepID]
		if !ok {
			t.Errorf("no bar for step %s of run %s", r.step.StepID, r.run)
			continue
		}
		wantLeft := plotLeft + float64(r.step.StartedAt.Sub(start))/span*plotWidth
		wantWidth := math.Max(2, float64(time.Duration(r.step.DurationMS)*time.Millisecond)/span*plotWidth)
		if math.Abs(bb.Left-wantLeft) > tolerance || math.Abs(bb.Width-wantWidth) > tolerance {
			t.Errorf("step %s (%s, started +%s, %d ms): bar at %.1f, %.1f wide; want %.1f, %.1f wide",
				r.step.StepID, r.run, r.step.StartedAt.Sub(start), r.step.DurationMS, bb.Left, bb.Width, wantLeft, wantWidth)
		}
	}
	if len(bars) != len(steps) {
		t.Errorf("%d bars for %d recorded steps", len(bars), len(steps))
	}

	// What ran side by side overlaps; the loop's iterations (one at a
	// time) follow each other; long steps are long.
	bar := func(step string) barBox { return byKey[execID+"/"+step] }
	left, right := bar("left"), bar("right")
	if !(left.Left < right.Left+right.Width && right.Left < left.Left+left.Width) {
		t.Errorf("the parallel children do not overlap: left %+v, right %+v", left, right)
	}
	if left.Width <= right.Width {
		t.Errorf("the 150 ms step's bar (%.1f) is not wider than the 40 ms one's (%.1f)", left.Width, right.Width)
	}
	for i := 1; i < 3; i++ {
		prev, cur := bar(fmt.Sprintf("tick[%d]", i-1)), bar(fmt.Sprintf("tick[%d]", i))
		if cur.Left < prev.Left+prev.Width-tolerance {
			t.Errorf("iteration %d starts at %.1f before iteration %d ends at %.1f", i, cur.Left, i-1, prev.Left+prev.Width)
		}
	}

	// Rows in plan order, the agent's run under its step.
	rows := eval[[]string](t, tab, `Array.from(document.querySelectorAll('#gantt g.row')).map(g => g.dataset.step)`)
	agentRun := children[0].ExecID
	i := slices.Index(rows, "count")
	if i < 0 || i+3 >= len(rows) || !strings.HasPrefix(rows[i+1], "model_") || rows[i+2] != "call_0" || !strings.HasPrefix(rows[i+3], "model_") {
		t.Errorf("rows %v: want count followed by the agent's model turn, tool call and model turn", rows)
	}
	if n := eval[int](t, tab, fmt.Sprintf(`document.querySelectorAll('#gantt g.row[data-run=%q]').length`, agentRun)); n != 3 {
		t.Errorf("%d rows of the agent's run %s, want 3", n, agentRun)
	}
	want := []string{"warm", "fan", "left", "right", "each", "tick[0]", "tick[1]", "tick[2]", "count"}
	if !slices.Equal(rows[:len(want)], want) {
		t.Errorf("rows begin %v, want %v", rows[:min(len(rows), len(want))], want)
	}

	// Clicking the failing step shows its error.
	do(t, tab, "clicking the failing step",
		chromedp.Click(chromedp.CSS(`#gantt g.row[data-step="broken"] rect.bar`)),
		chromedp.WaitVisible(chromedp.CSS(`#step[data-step="broken"] #step-error`)))
	if msg := eval[string](t, tab, "document.getElementById('step-error').textContent"); !strings.Contains(msg, "the upstream said no") || !strings.Contains(msg, "tool_error") {
		t.Errorf("the failing step's detail says %q, want its error", msg)
	}
	if a := eval[string](t, tab, "document.getElementById('step-attempts').textContent"); a != "1" {
		t.Errorf("attempts %q, want 1", a)
	}

	// The markup output is text: no script ran, no element was made.
	do(t, tab, "clicking the markup step",
		chromedp.Click(chromedp.CSS(`#gantt g.row[data-step="markup"] rect.bar`)),
		chromedp.WaitVisible(chromedp.CSS(`#step[data-step="markup"] #step-output pre`)))
	out := eval[string](t, tab, "document.querySelector('#step-output pre').textContent")
	if !strings.Contains(out, `<script>window.__pwned = 1</script><b id="bold">bold?</b>`) {
		t.Errorf("the markup step's output shows %q, want the markup as text", out)
	}
	if eval[bool](t, tab, "window.__pwned !== undefined || document.getElementById('bold') !== null || document.querySelectorAll('#detail script').length > 0") {
		t.Error("the markup in a step's output ran or became elements")
	}

	if *update {
		do(t, tab, "showing the failing step",
			chromedp.Click(chromedp.CSS(`#gantt g.row[data-step="broken"] rect.bar`)),
			chromedp.WaitVisible(chromedp.CSS(`#step[data-step="broken"] #step-error`)))
		screenshot(t, tab, "viewer-run.png")
		runPlan(t, alice, `{"steps":[{"id":"fetch","tool":"sleep","arguments":{"ms":25,"label":"q"}},{"id":"check","tool":"json_query","arguments":{"query":".x | not_a_function","input":{}}}]}`)
		runPlan(t, alice, `{"steps":[{"id":"quick","tool":"sleep","arguments":{"ms":5,"label":"q"}}]}`)
		do(t, tab, "opening the list", chromedp.Navigate(vs.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#runs")))
		screenshot(t, tab, "viewer-runs.png")
	}
}

// screenshot writes the viewport of tab to docs/name.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("taking the screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/%s", name)
}

// TestBrowserLive opens the page of a run that waits on a gate, opens the
// gate, and watches the page turn to success without a reload.
func TestBrowserLive(t *testing.T) {
	b := theBrowser(t)
	open, started := make(chan struct{}), make(chan struct{}, 1)
	vs := startViewerServer(t, gateTool(t, open, started))
	alice := vs.client(t, aliceToken)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runPlan(t, alice, `{"steps":[{"id":"first","tool":"sleep","arguments":{"ms":5}},{"id":"wait","tool":"gate","arguments":{}}]}`)
	}()
	t.Cleanup(wg.Wait)
	t.Cleanup(func() {
		select {
		case <-open:
		default:
			close(open)
		}
	})
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the gate was never called")
	}
	runs, _, err := vs.store.List(t.Context(), store.ListOptions{Status: store.StatusRunning})
	if err != nil || len(runs) != 1 {
		t.Fatalf("running runs: %v, %v; want one", runs, err)
	}
	execID := runs[0].ExecID

	tab := b.tab(t)
	signIn(t, tab, vs.srv.URL, aliceToken)
	do(t, tab, "opening the running run", chromedp.Navigate(vs.srv.URL+"/ui/runs/"+execID), chromedp.WaitVisible(chromedp.CSS("#gantt")))
	if s := eval[string](t, tab, "document.getElementById('run-head').dataset.status"); s != "running" {
		t.Fatalf("the page shows %q, want running", s)
	}
	if c := eval[string](t, tab, `document.querySelector('#gantt g.row[data-step="wait"] rect.bar').getAttribute('class')`); !strings.Contains(c, "s-running") {
		t.Errorf("the waiting step's bar is %q, want s-running", c)
	}
	eval[bool](t, tab, "window.__samePage = true")
	close(open)
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.getElementById('run-head').dataset.status === 'success'`,
		chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the page never showed success: %v", err)
	}
	if !eval[bool](t, tab, "window.__samePage === true") {
		t.Error("the page was reloaded")
	}
	if c := eval[string](t, tab, `document.querySelector('#gantt g.row[data-step="wait"] rect.bar').getAttribute('class')`); !strings.Contains(c, "s-success") {
		t.Errorf("the gate's bar is %q after the run, want s-success", c)
	}
	if eval[string](t, tab, "document.getElementById('live').dataset.live") != "0" {
		t.Error("the page still polls a finished run")
	}
}

// TestBrowserLargeRun draws a run of 1,000 steps and reports how long the
// page took to load and lay out (BENCHMARKS.md); it asserts no time.
func TestBrowserLargeRun(t *testing.T) {
	b := theBrowser(t)
	vs := startViewerServer(t)
	ctx := t.Context()
	// The owner of the static token alice's runs (owners are namespaced by
	// how their caller authenticated).
	const aliceOwner = "static:alice"
	const n = 1000
	start := time.Now().Add(-time.Minute)
	if err := vs.store.StartRun(ctx, store.Run{ExecID: "large", Tool: "cli", Owner: aliceOwner, UserID: "alice", StartedAt: start, StepCount: n,
		FirstStep: "s0 (sleep)", Plan: json.RawMessage(`{"steps":[]}`)}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		st := store.StepRecord{ExecID: "large", StepID: fmt.Sprintf("s%d", i), Index: i, Path: fmt.Sprintf("plan.steps[%d]", i),
			Kind: "tool", Tool: "sleep", Status: "success", Attempts: 1, StartedAt: start.Add(time.Duration(i) * 50 * time.Millisecond),
			DurationMS: 40 + int64(i%7)*10, Arguments: json.RawMessage(`{"ms":40}`), Output: json.RawMessage(`{"label":"x"}`)}
		if err := vs.store.QueueRecordStep(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := vs.store.FinishRun(ctx, "large", store.StatusSuccess, json.RawMessage(`{"artifact":{"status":"success"}}`), start.Add(n*50*time.Millisecond), 0); err != nil {
		t.Fatal(err)
	}
	if err := vs.store.StartRun(ctx, store.Run{ExecID: "small", Tool: "cli", Owner: aliceOwner, UserID: "alice", StartedAt: start, StepCount: 1}); err != nil {
		t.Fatal(err)
	}
	if err := vs.store.RecordStep(ctx, store.StepRecord{ExecID: "small", StepID: "s0", Path: "plan.steps[0]", Kind: "tool", Tool: "sleep",
		Status: "success", Attempts: 1, StartedAt: start, DurationMS: 40}); err != nil {
		t.Fatal(err)
	}
	if err := vs.store.FinishRun(ctx, "small", store.StatusSuccess, json.RawMessage(`{"artifact":{"status":"success"}}`), start.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	tab := b.tab(t)
	signIn(t, tab, vs.srv.URL, aliceToken)
	// A run of one step first, as a yardstick of the machine's speed: the
	// same page, the same browser, moments apart.
	for _, run := range []struct {
		id    string
		steps int
	}{{"small", 1}, {"large", n}, {"small", 1}, {"large", n}} {
		do(t, tab, "opening run "+run.id, chromedp.Navigate(vs.srv.URL+"/ui/runs/"+run.id), chromedp.WaitVisible(chromedp.CSS("#gantt")))
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.readyState === 'complete'`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
			t.Fatal(err)
		}
		timing := eval[map[string]float64](t, tab, `(() => {
			const n = performance.getEntriesByType('navigation')[0];
			return {response: n.responseEnd - n.startTime, dom: n.domContentLoadedEventEnd - n.startTime,
				load: n.loadEventEnd - n.startTime, bytes: n.transferSize || n.encodedBodySize};
		})()`)
		if bars := eval[int](t, tab, "document.querySelectorAll('#gantt rect.bar').length"); bars != run.steps {
			t.Errorf("run %s: %d bars, want %d", run.id, bars, run.steps)
		}
		t.Logf("a run of %4d steps: response complete %4.0f ms, DOMContentLoaded %4.0f ms, load %4.0f ms, %4.0f KiB",
			run.steps, timing["response"], timing["dom"], timing["load"], timing["bytes"]/1024)
	}
}

// TestServedWithMCP: serve --http serves the viewer at /ui/ behind the
// tokens of /mcp, each seeing the runs it started there, without a browser.
func TestServedWithMCP(t *testing.T) {
	vs := startViewerServer(t)
	aliceRun := runPlan(t, vs.client(t, aliceToken), `{"steps":[{"id":"a","tool":"sleep","arguments":{"ms":1}}]}`)
	bobRun := runPlan(t, vs.client(t, bobToken), `{"steps":[{"id":"b","tool":"sleep","arguments":{"ms":1}}]}`)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	fetch := func(path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, vs.srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := fetch("/ui/", ""); code != http.StatusSeeOther {
		t.Errorf("/ui/ without a token: %d, want a redirect to the login form", code)
	}
	code, body := fetch("/ui/", aliceToken)
	if code != http.StatusOK || !strings.Contains(body, aliceRun) || strings.Contains(body, bobRun) {
		t.Errorf("alice's /ui/: %d; lists hers %v, bob's %v", code, strings.Contains(body, aliceRun), strings.Contains(body, bobRun))
	}
	if code, _ := fetch("/ui/runs/"+aliceRun, bobToken); code != http.StatusNotFound {
		t.Errorf("bob reading alice's run: %d, want 404", code)
	}
	if code, _ := fetch("/ui/runs/"+aliceRun, "a-token-no-one-has"); code != http.StatusUnauthorized {
		t.Errorf("an unknown token: %d, want 401", code)
	}
}
