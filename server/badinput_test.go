package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

var badInputReport = flag.String("badinput-report", "", "write a Markdown table of the bad-input corpus's measurements to this `file`")

// badCase is one file of testdata/badinput: a hostile request and the
// error it must get.
type badCase struct {
	Description string          `json:"description"`
	Transport   string          `json:"transport"` // "" (an MCP tool call) or "raw" (stdio lines and HTTP bodies)
	Arguments   json.RawMessage `json:"arguments"`
	Raw         string          `json:"raw"`
	Generate    *struct {
		Kind string `json:"kind"`
		N    int    `json:"n"`
	} `json:"generate"`
	Expect     badExpect  `json:"expect"`
	ExpectHTTP *badExpect `json:"expect_http"`
	// MaxAllocMiB, when set, lowers the allocation the case may cause
	// from 1 GiB.
	MaxAllocMiB uint64 `json:"max_alloc_mib"`
}

// badExpect is the answer a case must get: code is an orchestra error code
// (or "success"), "jsonrpc:N" for a JSON-RPC error, or "http:N"; hint is a
// part of the message that says how to fix it.
type badExpect struct {
	Code string `json:"code"`
	Hint string `json:"hint"`
}

// badMeasure is what handling one case cost.
type badMeasure struct {
	name, transport, code string
	took                  time.Duration
	alloc                 uint64
	goroutines            int
}

// badInputApp builds the app the corpus runs against: the defaults, with
// http_request allowed to any host but guarded, a resolver that points
// internal.test at loopback and metadata.test at the cloud metadata
// address, and a "public" server (public.test) that redirects.
func badInputApp(t *testing.T) (*server.App, map[string]string) {
	t.Helper()
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "secret") }))
	t.Cleanup(loop.Close)
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	t.Cleanup(public.Close)
	publicAddr := netip.MustParseAddrPort(public.Listener.Addr().String())
	dns := newFakeDNS(t, map[string]netip.Addr{
		"internal.test": netip.MustParseAddr("127.0.0.1"),
		"metadata.test": netip.MustParseAddr("169.254.169.254"),
		"public.test":   netip.MustParseAddr("127.0.0.1"),
	})
	cfg := config.Default()
	// The jq programs and templates that must stop at their CPU time take
	// 2 s of it at the lowest CPU priority: on a loaded machine that is
	// tens of seconds of wall time, and a step deadline of 60 s would race
	// it. No case here is about the wall-clock deadlines; the test
	// binary's own timeout still bounds the test.
	cfg.Limits.StepTimeout = time.Hour
	cfg.Limits.PlanTimeout = time.Hour
	cfg.Builtins.HTTP.AllowedHosts = []string{"*"}
	cfg.Builtins.HTTP.Timeout = 5e9
	cfg.Builtins.HTTP.Resolver = dns.Resolver()
	cfg.Builtins.HTTP.AllowAddr = func(ap netip.AddrPort) bool { return ap == publicAddr }
	_, loopPort, _ := strings.Cut(strings.TrimPrefix(loop.URL, "http://127.0.0.1"), ":")
	vars := map[string]string{
		"{{LOOPBACK}}":      strings.TrimPrefix(loop.URL, "http://"),
		"{{LOOPBACK_PORT}}": loopPort,
		"{{PUBLIC_PORT}}":   strconv.Itoa(int(publicAddr.Port())),
	}
	return newApp(t, cfg), vars
}

func loadBadInput(t *testing.T, vars map[string]string) map[string]*badCase {
	t.Helper()
	files, err := filepath.Glob("../testdata/badinput/*.json")
	if err != nil || len(files) < 60 {
		t.Fatalf("want at least 60 cases in testdata/badinput, found %d (%v)", len(files), err)
	}
	cases := map[string]*badCase{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range vars {
			data = bytes.ReplaceAll(data, []byte(k), []byte(v))
		}
		var c badCase
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Description == "" || c.Expect.Code == "" {
			t.Fatalf("%s: every case needs a description and an expected code", f)
		}
		c.Raw = strings.NewReplacer(`\xff`, "\xff", `\xfe`, "\xfe").Replace(c.Raw)
		if err := c.generate(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cases[strings.TrimSuffix(filepath.Base(f), ".json")] = &c
	}
	return cases
}

// generate fills the arguments or the raw message of a generated case.
func (c *badCase) generate() error {
	g := c.Generate
	if g == nil {
		return nil
	}
	render := `{"tool":"render","arguments":{"template":"x"}}`
	var s string
	switch g.Kind {
	case "steps":
		s = `{"plan":{"steps":[` + strings.Repeat(render+",", g.N-1) + render + `]}}`
	case "fanout":
		s = `{"plan":{"steps":[{"parallel":[` + strings.Repeat(render+",", g.N-1) + render + `]}]}}`
	case "group_depth":
		s = `{"plan":{"steps":[` + strings.Repeat(`{"parallel":[`, g.N) + render + strings.Repeat(`]}`, g.N) + `]}}`
	case "templates":
		var b strings.Builder
		for i := range g.N {
			fmt.Fprintf(&b, `"v%d":"$bindings.x",`, i)
		}
		s = `{"plan":{"steps":[{"tool":"render","arguments":{"template":"x","values":{` + strings.TrimSuffix(b.String(), ",") + `}}}]},"bindings":{"x":1}}`
	case "big_string":
		s = `{"plan":{"steps":[` + render + `]},"bindings":{"blob":"` + strings.Repeat("a", g.N) + `"}}`
	case "big_jq_input":
		s = `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":"$bindings.blob"}}]},"bindings":{"blob":"` + strings.Repeat("a", g.N) + `"}}`
	case "deep_value":
		s = `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":"[paths] | length","input":` + strings.Repeat("[", g.N) + strings.Repeat("]", g.N) + `}}]}}`
	case "render_doubling":
		// A variable doubled n times.
		tmpl := `{{$x := \"ab\"}}` + strings.Repeat(`{{$x = printf \"%s%s\" $x $x}}`, g.N) + `{{len $x}}`
		s = `{"plan":{"steps":[{"tool":"render","arguments":{"template":"` + tmpl + `"}}]}}`
	case "render_defines":
		// n defines, each calling the one before twice, the last writing
		// nothing: 2^n calls that never reach the output cap.
		var b strings.Builder
		b.WriteString(`{{define \"t0\"}}{{end}}`)
		for i := 1; i <= g.N; i++ {
			fmt.Fprintf(&b, `{{define \"t%d\"}}{{template \"t%d\"}}{{template \"t%d\"}}{{end}}`, i, i-1, i-1)
		}
		fmt.Fprintf(&b, `{{template \"t%d\"}}`, g.N)
		s = `{"plan":{"steps":[{"tool":"render","arguments":{"template":"` + b.String() + `"}}]}}`
	case "amplify", "amplify_interpolated":
		// A 250 KB output referenced n times.
		var b strings.Builder
		for i := range g.N {
			if g.Kind == "amplify" {
				fmt.Fprintf(&b, `"v%d":"$0.output.result",`, i)
			} else {
				b.WriteString(`${0.output.result}`)
			}
		}
		values := `{` + strings.TrimSuffix(b.String(), ",") + `}`
		if g.Kind == "amplify_interpolated" {
			values = `{"s":"` + b.String() + `"}`
		}
		s = `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":".","input":"$bindings.blob"}},` +
			`{"tool":"render","arguments":{"template":"{{len .}}","values":` + values + `}}]},"bindings":{"blob":"` + strings.Repeat("a", 250000) + `"}}`
	case "history_turns":
		// n turns that are each invalid twice over: a made-up role and
		// content that is not a string.
		s = `{"prompt":"go","context":{"history":[` + strings.Repeat(`{"role":"robot","content":1},`, g.N-1) + `{"role":"robot","content":1}]}}`
	case "plan_string_deep":
		// A plan sent as a JSON string whose text nests n arrays deep.
		inner, _ := json.Marshal(strings.Repeat("[", g.N) + strings.Repeat("]", g.N))
		s = `{"plan":` + string(inner) + `}`
	case "wide_raw_steps", "wide_raw_client_tools", "wide_raw_history":
		// One array of n numbers where steps, client tools or history
		// turns go: 2 bytes a value, within the request's bytes.
		zeros := "[" + strings.Repeat("0,", g.N-1) + "0]"
		args := map[string]string{
			"wide_raw_steps":        `{"plan":{"steps":` + zeros + `}}`,
			"wide_raw_client_tools": `{"plan":{"steps":[]},"client_tools":` + zeros + `}`,
			"wide_raw_history":      `{"prompt":"go","context":{"history":` + zeros + `}}`,
		}[g.Kind]
		c.Raw = `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":` + args + `}}`
		return nil
	case "deep_raw":
		c.Raw = `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"bindings":{"x":` + strings.Repeat("[", g.N) + strings.Repeat("]", g.N) + `}}}}`
		return nil
	case "big_raw":
		c.Raw = `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"bindings":{"x":"` + strings.Repeat("a", g.N) + `"}}}}`
		return nil
	default:
		return fmt.Errorf("unknown generator %q", g.Kind)
	}
	c.Arguments = json.RawMessage(s)
	return nil
}

// TestBadInput sends every case of testdata/badinput through a real MCP
// session, in memory and over Streamable HTTP (tool calls), or as raw stdio
// lines and HTTP bodies (raw cases). Each must get its expected error code
// with a hint on how to fix it, within generous bounds of memory and
// goroutines, and the server must answer the next request normally.
func TestBadInput(t *testing.T) {
	app, vars := badInputApp(t)
	cases := loadBadInput(t, vars)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cases {
			if !yield(n) {
				return
			}
		}
	})
	var measures []badMeasure
	record := func(t *testing.T, name, transport string, c *badCase, run func() []string) {
		t.Helper()
		runtime.GC()
		g0 := runtime.NumGoroutine()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		codes := run()
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		g1 := settleGoroutines(g0)
		want := c.Expect
		if transport == "http" && c.ExpectHTTP != nil {
			want = *c.ExpectHTTP
		}
		got := strings.Join(codes, ",")
		if !slices.Contains(codes, want.Code) {
			t.Errorf("%s over %s: codes %v, want %s", name, transport, codes, want.Code)
		}
		alloc := m1.TotalAlloc - m0.TotalAlloc
		maxAlloc := uint64(1 << 30)
		if c.MaxAllocMiB > 0 {
			maxAlloc = c.MaxAllocMiB << 20
		}
		if alloc > maxAlloc {
			t.Errorf("%s over %s: handling it allocated %d MiB; want under %d MiB", name, transport, alloc>>20, maxAlloc>>20)
		}
		if g1 > g0+8 {
			t.Errorf("%s over %s: %d goroutines before, %d after", name, transport, g0, g1)
		}
		measures = append(measures, badMeasure{name: name, transport: transport, code: got, took: took, alloc: alloc, goroutines: g1 - g0})
	}

	sessions := map[string]*mcp.ClientSession{"memory": connectInMemory(t, app, v20251125)}
	sessions["http"], _ = connectHTTP(t, app, server.HTTPOptions{}, v20251125)
	stdio := newRawStdioApp(t, app)
	httpSrv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(httpSrv.Close)
	rawHTTP := newRawHTTP(t, httpSrv.URL+"/mcp")

	for _, name := range names {
		c := cases[name]
		t.Run(name, func(t *testing.T) {
			if c.Transport == "raw" {
				record(t, name, "stdio", c, func() []string { return stdio.call(c.Raw, c.Expect.Hint) })
				stdio.stillServes()
				record(t, name, "http", c, func() []string { return rawHTTP.call(c.Raw, c.Expect.Hint) })
				servertest.StillServes(t, sessions["http"])
				return
			}
			for _, tr := range []string{"memory", "http"} {
				cs := sessions[tr]
				want := c.Expect
				if tr == "http" && c.ExpectHTTP != nil {
					want = *c.ExpectHTTP
				}
				record(t, name, tr, c, func() []string { return callBad(t, cs, c.Arguments, want.Hint) })
				servertest.StillServes(t, cs)
			}
		})
	}
	if *badInputReport != "" {
		writeBadReport(t, *badInputReport, cases, measures)
	}
}

// settleGoroutines waits a bounded time for the goroutine count to come
// back to base and returns it.
func settleGoroutines(base int) int {
	deadline := time.Now().Add(3 * time.Second)
	n := runtime.NumGoroutine()
	for n > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// callBad calls agent_orchestrate with raw arguments and returns the codes
// of the answer; it fails the test when hint is not in the answer's text.
func callBad(t *testing.T, cs *mcp.ClientSession, args json.RawMessage, hint string) []string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: args})
	if err != nil {
		var je *jsonrpc.Error
		code := "transport"
		if errors.As(err, &je) {
			code = fmt.Sprintf("jsonrpc:%d", je.Code)
		}
		checkHint(t, err.Error(), hint)
		return []string{code}
	}
	// The hint may be in the text or only in the structured content (a
	// compact response's text lists the first problems).
	structured, _ := json.Marshal(res.StructuredContent)
	checkHint(t, servertest.Text(res)+"\n"+string(structured), hint)
	return envelopeCodes(res.StructuredContent, res.IsError)
}

func checkHint(t *testing.T, text, hint string) {
	t.Helper()
	if !strings.Contains(strings.ToLower(text), strings.ToLower(hint)) {
		if len(text) > 2000 {
			text = text[:2000] + "..."
		}
		t.Errorf("the answer does not mention %q:\n%s", hint, text)
	}
}

// envelopeCodes lists every code in an envelope: validation errors, run
// errors and step errors, or "success".
func envelopeCodes(structured any, isError bool) []string {
	data, _ := json.Marshal(structured)
	var env struct {
		Artifact struct {
			Errors           []servertest.Error `json:"errors"`
			ValidationErrors []servertest.Issue `json:"validation_errors"`
			Steps            []*servertest.Step `json:"steps"`
		} `json:"artifact"`
	}
	_ = json.Unmarshal(data, &env)
	var codes []string
	if !isError {
		codes = append(codes, "success")
	}
	for _, e := range env.Artifact.ValidationErrors {
		codes = append(codes, string(e.Code))
	}
	for _, e := range env.Artifact.Errors {
		codes = append(codes, string(e.Code))
	}
	var walk func([]*servertest.Step)
	walk = func(steps []*servertest.Step) {
		for _, s := range steps {
			if s.Error != nil {
				codes = append(codes, string(s.Error.Code))
			}
			walk(s.Children)
		}
	}
	walk(env.Artifact.Steps)
	return codes
}

// rawStdioApp serves an app over pipes for raw lines.
type rawStdioApp struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Scanner
}

func newRawStdioApp(t *testing.T, app *server.App) *rawStdioApp {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- app.ServeStdio(t.Context(), inR, outW)
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	r := &rawStdioApp{t: t, in: inW, out: sc}
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("ServeStdio did not return after stdin closed")
		}
	})
	r.send(initializeBody)
	r.recv()
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawStdioApp) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatalf("writing: %v", err)
	}
}

func (r *rawStdioApp) recv() map[string]any {
	r.t.Helper()
	for r.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(r.out.Bytes(), &m); err != nil {
			r.t.Fatalf("the server wrote a line that is not JSON: %q", truncate(r.out.Bytes()))
		}
		if _, ok := m["id"]; ok {
			return m
		}
	}
	r.t.Fatalf("the server closed stdout: %v", r.out.Err())
	return nil
}

// call sends one raw line and returns the codes of its answer.
func (r *rawStdioApp) call(line, hint string) []string {
	r.t.Helper()
	r.send(line)
	return rpcCodes(r.t, r.recv(), 0, hint)
}

// stillServes checks that a plain plan still runs.
func (r *rawStdioApp) stillServes() {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"plan":{"steps":[{"tool":"render","arguments":{"template":"ok"}}]}}}}`)
	m := r.recv()
	if codes := rpcCodes(r.t, m, 0, ""); !slices.Contains(codes, "success") {
		r.t.Fatalf("the stdio server does not answer normally any more: %v", m)
	}
}

// rpcCodes returns the codes of a JSON-RPC response: its error's, or those
// of the envelope in its result; status, when not 0, adds "http:status".
func rpcCodes(t *testing.T, m map[string]any, status int, hint string) []string {
	t.Helper()
	var codes []string
	if status != 0 {
		codes = append(codes, fmt.Sprintf("http:%d", status))
	}
	if e, ok := m["error"].(map[string]any); ok {
		code, _ := e["code"].(float64)
		msg, _ := e["message"].(string)
		if msg == "" {
			t.Errorf("a JSON-RPC error without a message: %v", m)
		}
		checkHint(t, msg, hint)
		return append(codes, fmt.Sprintf("jsonrpc:%d", int(code)))
	}
	res, _ := m["result"].(map[string]any)
	data, _ := json.Marshal(res)
	checkHint(t, string(data), hint)
	isError, _ := res["isError"].(bool)
	return append(codes, envelopeCodes(res["structuredContent"], isError)...)
}

// rawHTTP posts raw bodies in a session it opened with raw requests.
type rawHTTP struct {
	t       *testing.T
	url     string
	session string
}

func newRawHTTP(t *testing.T, url string) *rawHTTP {
	r := &rawHTTP{t: t, url: url}
	resp, _ := r.post(initializeBody)
	r.session = resp.Header.Get("Mcp-Session-Id")
	if r.session == "" {
		t.Fatalf("initialize: no session id (status %d)", resp.StatusCode)
	}
	r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawHTTP) post(body string) (*http.Response, []byte) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodPost, r.url, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
		req.Header.Set("Mcp-Protocol-Version", v20251125)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// call posts a raw body and returns the codes of the answer.
func (r *rawHTTP) call(body, hint string) []string {
	r.t.Helper()
	resp, data := r.post(body)
	msg := data
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg = nil
		for line := range strings.SplitSeq(string(data), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				msg = []byte(d)
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		if strings.TrimSpace(string(data)) == "" {
			r.t.Errorf("status %d with an empty body", resp.StatusCode)
		}
		checkHint(r.t, string(data), hint)
		return []string{fmt.Sprintf("http:%d", resp.StatusCode)}
	}
	return rpcCodes(r.t, m, resp.StatusCode, hint)
}

func writeBadReport(t *testing.T, path string, cases map[string]*badCase, ms []badMeasure) {
	var b strings.Builder
	b.WriteString("| case | what it sends | transport | answer | time | allocated | goroutines left |\n|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d |\n", m.name, cases[m.name].Description, m.transport, m.code, m.took.Round(time.Millisecond), formatMiB(m.alloc), m.goroutines)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Error(err)
	}
}

func formatMiB(n uint64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
