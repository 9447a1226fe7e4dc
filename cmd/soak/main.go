// Command soak loads an in-process orchestra over Streamable HTTP on
// loopback for a bounded time and reports whether every request got its
// answer.
//
// N clients, each with its own MCP session, send a mix of good, failing and
// hostile plans, some of them calling a downstream fixture server that is
// killed every few seconds (and restarted by orchestra). With -hostile H,
// H more clients replay the hostile inputs orchestra was attacked with
// (memory and CPU bombs in json_query and render, output amplification,
// oversized and noisy downstream answers, SSRF, a decompression bomb,
// self-recursion over HTTP, a plan of 14,000 unknown tools), one after
// another; with -innocent, one more client sends a small good plan at a
// time and its latency is measured alone for -baseline first, then under
// the load. At the end it prints requests sent, answers received, errors
// by code, p50/p99 latency, the innocent client's p50/p95 alone and under
// load, the answers to each hostile input, and goroutines and RSS at start
// and end. With -check it exits non-zero unless every request was answered
// exactly once, every hostile input got an error code, and goroutines did
// not grow beyond -max-goroutine-growth. Run it from the repository root:
//
//	go run ./cmd/soak -duration 60s -clients 32
//	go build -o /tmp/soak ./cmd/soak && prlimit --as=4294967296 /tmp/soak -duration 60s -clients 8 -hostile 4 -innocent -baseline 10s -check
package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry/builtin"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
)

func main() {
	builtin.ServeWorker() // the orchestra this soak runs evaluates in copies of this program
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	duration   time.Duration
	clients    int
	hostile    int
	innocent   bool
	baseline   time.Duration
	maxRatio   float64
	killEvery  time.Duration
	check      bool
	maxGrowth  int
	callTimout time.Duration
	fixture    string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long clients send requests")
	fs.IntVar(&o.clients, "clients", 32, "concurrent HTTP clients, each with its own session")
	fs.DurationVar(&o.killEvery, "kill-every", 3*time.Second, "how often the downstream fixture server is killed; 0 never")
	fs.BoolVar(&o.check, "check", false, "exit 1 unless every request was answered and goroutines did not grow")
	fs.IntVar(&o.maxGrowth, "max-goroutine-growth", 50, "with -check: goroutines allowed at the end beyond those at the start")
	fs.DurationVar(&o.callTimout, "call-timeout", 60*time.Second, "a request not answered within this counts as lost")
	fs.IntVar(&o.hostile, "hostile", 0, "clients that replay the hostile inputs, one after another")
	fs.BoolVar(&o.innocent, "innocent", false, "one more client sends a small good plan at a time; its latency is reported alone and under load")
	fs.DurationVar(&o.baseline, "baseline", 5*time.Second, "with -innocent: how long it runs alone before the other clients start")
	fs.Float64Var(&o.maxRatio, "max-innocent-p95-ratio", 0, "with -check and -innocent: the innocent client's p95 under load may be at most this many times its p95 alone (0: not checked)")
	fs.StringVar(&o.fixture, "fixture", "", "the fixture server binary; default: built from ./testdata/fixtureserver")
	replicas := fs.Bool("replicas", false, "two replicas on a throw-away PostgreSQL database: load at both, SIGKILL one halfway (-duration before and after), check the records and the leases")
	lease := fs.Duration("lease", 3*time.Second, "with -replicas: the store lease")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *replicas {
		r, err := soakReplicas(ctx, replicaOptions{duration: o.duration, clients: o.clients, lease: *lease, sleepMS: 200, fixture: o.fixture}, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "soak:", err)
			return 1
		}
		r.print(stdout)
		if problems := r.problems(); o.check && len(problems) > 0 {
			for _, p := range problems {
				fmt.Fprintln(stderr, "soak: FAIL:", p)
			}
			return 1
		}
		if o.check {
			fmt.Fprintln(stderr, "soak: PASS")
		}
		return 0
	}
	r, err := soak(ctx, o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	r.print(stdout, o)
	if o.check {
		if problems := r.problems(o); len(problems) > 0 {
			for _, p := range problems {
				fmt.Fprintln(stderr, "soak: FAIL:", p)
			}
			return 1
		}
		fmt.Fprintln(stderr, "soak: PASS")
	}
	return 0
}

// report is what a soak run measured.
type report struct {
	sent, received, lost atomic.Int64
	kills                int
	mu                   sync.Mutex
	codes                map[string]int
	kinds                map[string]int
	latencies            []time.Duration
	hostile              map[string]map[string]int // kind → answer code → count
	alone, loaded        []time.Duration           // the innocent client's latencies
	goroutinesStart      int
	goroutinesEnd        int
	rssStart, rssEnd     int64
	wall                 time.Duration
}

func (r *report) add(kind, code string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes[code]++
	r.kinds[kind]++
	r.latencies = append(r.latencies, d)
}

func (r *report) addHostile(kind, code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hostile[kind] == nil {
		r.hostile[kind] = map[string]int{}
	}
	r.hostile[kind][code]++
}

func (r *report) addInnocent(loaded bool, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if loaded {
		r.loaded = append(r.loaded, d)
	} else {
		r.alone = append(r.alone, d)
	}
}

// innocentRatio is the innocent client's p95 under load over its p95 alone.
func (r *report) innocentRatio() float64 {
	a, b := percentile(sorted(r.alone), 0.95), percentile(sorted(r.loaded), 0.95)
	if a == 0 {
		return 0
	}
	return float64(b) / float64(a)
}

func sorted(ds []time.Duration) []time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds
}

func (r *report) problems(o options) []string {
	var p []string
	for _, kind := range slices.Sorted(mapsKeys(hostilePlans)) {
		for code, n := range r.hostile[kind] {
			if code == "success" || code == "protocol_error" || code == "error_without_code" {
				p = append(p, fmt.Sprintf("hostile input %s was answered %d times with %s", kind, n, code))
			}
		}
	}
	if o.hostile > 0 && len(r.hostile) < len(hostilePlans) {
		p = append(p, fmt.Sprintf("only %d of the %d hostile inputs were sent: run longer", len(r.hostile), len(hostilePlans)))
	}
	if o.innocent && (len(r.alone) == 0 || len(r.loaded) == 0) {
		p = append(p, "the innocent client has no latencies alone or under load")
	}
	if ratio := r.innocentRatio(); o.innocent && o.maxRatio > 0 && ratio > o.maxRatio {
		p = append(p, fmt.Sprintf("the innocent client's p95 under load is %.1f times its p95 alone, more than %.1f", ratio, o.maxRatio))
	}
	if s, got := r.sent.Load(), r.received.Load(); s != got {
		p = append(p, fmt.Sprintf("%d requests sent, %d answered", s, got))
	}
	if n := r.lost.Load(); n > 0 {
		p = append(p, fmt.Sprintf("%d requests were not answered within the call timeout", n))
	}
	if r.goroutinesEnd > r.goroutinesStart+o.maxGrowth {
		p = append(p, fmt.Sprintf("goroutines grew from %d to %d (allowed +%d)", r.goroutinesStart, r.goroutinesEnd, o.maxGrowth))
	}
	if r.codes["success"] == 0 {
		p = append(p, "no request succeeded")
	}
	return p
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func (r *report) print(w io.Writer, o options) {
	slices.Sort(r.latencies)
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| duration, clients | %s, %d |\n", o.duration, o.clients)
	fmt.Fprintf(w, "| requests sent | %d |\n", r.sent.Load())
	fmt.Fprintf(w, "| responses received | %d |\n", r.received.Load())
	fmt.Fprintf(w, "| requests lost (no answer within %s) | %d |\n", o.callTimout, r.lost.Load())
	fmt.Fprintf(w, "| throughput | %.0f requests/s |\n", float64(r.received.Load())/r.wall.Seconds())
	fmt.Fprintf(w, "| downstream server kills | %d |\n", r.kills)
	fmt.Fprintf(w, "| latency p50 / p99 / max | %s / %s / %s |\n", percentile(r.latencies, 0.5).Round(time.Microsecond*100), percentile(r.latencies, 0.99).Round(time.Microsecond*100), percentile(r.latencies, 1).Round(time.Millisecond))
	fmt.Fprintf(w, "| goroutines start / end | %d / %d |\n", r.goroutinesStart, r.goroutinesEnd)
	fmt.Fprintf(w, "| RSS start / end | %.1f MiB / %.1f MiB |\n", float64(r.rssStart)/(1<<20), float64(r.rssEnd)/(1<<20))
	fmt.Fprintf(w, "\n| answer (first error code, or success) | count |\n|---|---|\n")
	for _, c := range slices.Sorted(mapsKeys(r.codes)) {
		fmt.Fprintf(w, "| %s | %d |\n", c, r.codes[c])
	}
	fmt.Fprintf(w, "\n| plan kind | sent |\n|---|---|\n")
	for _, k := range slices.Sorted(mapsKeys(r.kinds)) {
		fmt.Fprintf(w, "| %s | %d |\n", k, r.kinds[k])
	}
	if o.innocent {
		alone, loaded := sorted(r.alone), sorted(r.loaded)
		fmt.Fprintf(w, "\n| innocent client | requests | p50 | p95 |\n|---|---|---|---|\n")
		fmt.Fprintf(w, "| alone (%s) | %d | %s | %s |\n", o.baseline, len(alone), percentile(alone, 0.5).Round(time.Microsecond*100), percentile(alone, 0.95).Round(time.Microsecond*100))
		fmt.Fprintf(w, "| under load | %d | %s | %s |\n", len(loaded), percentile(loaded, 0.5).Round(time.Microsecond*100), percentile(loaded, 0.95).Round(time.Microsecond*100))
		fmt.Fprintf(w, "| p95 under load / alone | | | %.2f |\n", r.innocentRatio())
	}
	if len(r.hostile) > 0 {
		fmt.Fprintf(w, "\n| hostile input | answers |\n|---|---|\n")
		for _, k := range slices.Sorted(mapsKeys(r.hostile)) {
			var parts []string
			for _, c := range slices.Sorted(mapsKeys(r.hostile[k])) {
				parts = append(parts, fmt.Sprintf("%s %d", c, r.hostile[k][c]))
			}
			fmt.Fprintf(w, "| %s | %s |\n", k, strings.Join(parts, ", "))
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// plans are the kinds of plan the clients send, each as tool arguments.
var plans = map[string]string{
	"good":               `{"plan":{"steps":[{"id":"q","tool":"json_query","arguments":{"query":"map(.*2) | add","input":[1,2,3]}},{"tool":"render","arguments":{"template":"sum {{.s}}","values":{"s":"$q.output.result"}}}]}}`,
	"good_parallel":      `{"plan":{"steps":[{"id":"g","parallel":[{"id":"a","tool":"render","arguments":{"template":"a"}},{"id":"b","tool":"json_query","arguments":{"query":"length","input":"abc"}}]}]}}`,
	"downstream":         `{"plan":{"steps":[{"id":"e","tool":"fx__echo","arguments":{"text":"hi"}},{"tool":"fx__add","arguments":{"a":1,"b":2}}]}}`,
	"downstream_slow":    `{"plan":{"steps":[{"tool":"fx__sleep","arguments":{"ms":200}}]}}`,
	"failing_tool":       `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":"error(\"boom\")","input":1}},{"tool":"render","arguments":{"template":"never"}}]}}`,
	"failing_downstream": `{"plan":{"steps":[{"tool":"fx__fail","arguments":{}}]}}`,
	"invalid_plan":       `{"plan":{"steps":[{"tool":"json_qeury","arguments":{}},{"tool":"render","arguments":{"values":{"v":"$nope.output.x"}}}]}}`,
	"hostile_jq":         `{"plan":{"steps":[{"tool":"json_query","arguments":{"query":"repeat(.)","input":1}}]}}`,
	"hostile_shape":      `{"plan":{"steps":"all of them"},"timeout_ms":"soon","bindigns":{}}`,
	"hostile_big":        `{"plan":{"steps":[` + strings.Repeat(`{"tool":"render","arguments":{"template":"x"}},`, 999) + `{"tool":"render","arguments":{"template":"x"}}]}}`,
}

// hostileInput is one of the inputs orchestra was attacked with, as tool
// arguments, and what it must be answered with: "error" (a code that says
// which limit it met) or "success" (orchestra shrugs it off).
type hostileInput struct {
	args string
	want string
}

// hostilePlans are the hostile inputs, their arguments with {{BOMB}} (a
// server answering a decompression bomb) and {{SELF}} (orchestra's own
// /mcp) still to fill in.
var hostilePlans = func() map[string]hostileInput {
	step := func(tool string, args map[string]any) string {
		data, _ := json.Marshal(map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": tool, "arguments": args}}}})
		return string(data)
	}
	jq := func(query string, input any) string {
		return step("json_query", map[string]any{"query": query, "input": input})
	}
	var defines strings.Builder
	defines.WriteString(`{{define "t0"}}{{end}}`)
	for i := 1; i <= 44; i++ {
		fmt.Fprintf(&defines, `{{define "t%d"}}{{template "t%d"}}{{template "t%d"}}{{end}}`, i, i-1, i-1)
	}
	defines.WriteString(`{{template "t44"}}`)
	values := map[string]any{}
	for i := range 998 {
		values[fmt.Sprint("v", i)] = "$0.output.result"
	}
	amplify, _ := json.Marshal(map[string]any{
		"plan": map[string]any{"steps": []any{
			map[string]any{"tool": "json_query", "arguments": map[string]any{"query": ".", "input": "$bindings.blob"}},
			map[string]any{"tool": "render", "arguments": map[string]any{"template": "{{len .}}", "values": values}},
		}},
		"bindings": map[string]any{"blob": strings.Repeat("a", 250000)},
	})
	self, _ := json.Marshal(map[string]any{
		"plan": map[string]any{"steps": []any{map[string]any{"tool": "http_request", "arguments": map[string]any{
			"method": "POST", "url": "{{SELF}}",
			"headers": map[string]any{"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
			"body": map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
				"name": "agent_orchestrate", "arguments": map[string]any{"plan": "$bindings.p", "bindings": map[string]any{"p": "$bindings.p"}}}},
		}}}},
	})
	var selfPlan map[string]any
	_ = json.Unmarshal(self, &selfPlan)
	selfPlan["bindings"] = map[string]any{"p": selfPlan["plan"]}
	self, _ = json.Marshal(selfPlan)
	return map[string]hostileInput{
		"jq_one_2gib_string":   {jq(`"x" * 2147483646 | length`, nil), "error"},
		"jq_8gib_sparse_index": {jq(`.[536870911] = 1 | length`, []any{}), "error"},
		"jq_doubling":          {jq(`reduce range(40) as $i ("a"; . + .) | length`, nil), "error"},
		"jq_tonumber":          {jq(`"9" * 3000000 | tonumber | . * . | tostring | length`, nil), "error"},
		"jq_bigint_squaring":   {jq(`reduce range(40) as $i (3; . * .) | tostring | length`, nil), "error"},
		"render_doubling":      {step("render", map[string]any{"template": `{{$x := "ab"}}` + strings.Repeat(`{{$x = printf "%s%s" $x $x}}`, 40) + `{{len $x}}`}), "error"},
		"render_2p44_calls":    {step("render", map[string]any{"template": defines.String()}), "error"},
		"amplify_998_refs":     {string(amplify), "error"},
		"downstream_50mb":      {step("fx__big", map[string]any{"bytes": 50_000_000}), "error"},
		"downstream_stray":     {`{"plan":{"steps":[{"tool":"fx__stray","arguments":{"lines":1000,"text":"debug: not JSON-RPC"}},{"tool":"fx__stray","arguments":{"lines":10000,"text":"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"flood\"}}"}},{"tool":"fx__echo","arguments":{"text":"after"}}]}}`, "success"},
		"ssrf_documentation":   {step("http_request", map[string]any{"url": "http://198.51.100.7/"}), "error"},
		"ssrf_own_interface":   {step("http_request", map[string]any{"url": "http://[::ffff:192.0.2.2]/"}), "error"},
		"gzip_bomb":            {step("http_request", map[string]any{"url": "{{BOMB}}"}), "success"},
		"self_recursion":       {string(self), "error"},
		"unknown_tools_14000":  {`{"plan":{"steps":[` + strings.TrimSuffix(strings.Repeat(`{"tool":"no_such_tool"},`, 14000), ",") + `]}}`, "error"},
	}
}()

func soak(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "orchestra-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fixture := o.fixture
	if fixture == "" {
		fixture = filepath.Join(dir, "fixtureserver")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", fixture, "./testdata/fixtureserver").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the fixture server (run from the repository root): %v\n%s", err, out)
		}
	}
	bomb := httptest.NewServer(http.HandlerFunc(gzipBomb))
	defer bomb.Close()
	bombAddr := netip.MustParseAddrPort(bomb.Listener.Addr().String())

	cfg := config.Default()
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"fx": {Command: fixture}}
	cfg.Builtins.HTTP.AllowedHosts = []string{"*"}
	// The bomb stands in for a public server; every other private address
	// stays refused.
	cfg.Builtins.HTTP.AllowAddr = func(ap netip.AddrPort) bool { return ap == bombAddr }
	cfg.Server.RateLimit.RequestsPerSecond = -1 // one address sends everything here
	os.Setenv("ORCHESTRA_SOAK_TOKENS", strings.Join([]string{tokenMixed, tokenHostile, tokenInnocent}, ","))
	cfg.Server.Auth.TokensEnv = "ORCHESTRA_SOAK_TOKENS"
	cfg.Server.ShutdownGrace = 5 * time.Second
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	app, err := server.New(ctx, cfg, server.Options{Logger: logger, Version: "soak"})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		app.Close()
		return nil, err
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- app.ServeHTTP(serveCtx, ln, server.HTTPOptions{}) }()
	url := "http://" + ln.Addr().String() + "/mcp"
	hostile := map[string]hostileInput{}
	for k, in := range hostilePlans {
		in.args = strings.NewReplacer("{{BOMB}}", bomb.URL, "{{SELF}}", url).Replace(in.args)
		hostile[k] = in
	}

	r := &report{codes: map[string]int{}, kinds: map[string]int{}, hostile: map[string]map[string]int{}}
	runtime.GC()
	r.goroutinesStart = runtime.NumGoroutine()
	r.rssStart = rss()

	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range plans {
			if !yield(k) {
				return
			}
		}
	})
	var wg sync.WaitGroup
	if o.innocent {
		innocentCtx, cancel := context.WithTimeout(ctx, o.baseline+o.duration)
		defer cancel()
		loadAt := time.Now().Add(o.baseline)
		wg.Go(func() { innocentClient(innocentCtx, url, loadAt, o, r) })
		t := time.NewTimer(o.baseline)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	start := time.Now()
	for i := range o.clients {
		wg.Go(func() { client(runCtx, i, url, kinds, o, r) })
	}
	for i := range o.hostile {
		wg.Go(func() { hostileClient(runCtx, i, url, hostile, o, r) })
	}
	killed := make(chan int, 1)
	go func() { killed <- killer(runCtx, app, o.killEvery) }()
	wg.Wait()
	r.wall = time.Since(start)
	r.kills = <-killed

	stopServing()
	if err := <-served; err != nil {
		fmt.Fprintln(stderr, "soak: serving:", err)
	}
	if err := app.Close(); err != nil {
		fmt.Fprintln(stderr, "soak: closing:", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > r.goroutinesStart && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	r.goroutinesEnd = runtime.NumGoroutine()
	r.rssEnd = rss()
	return r, nil
}

// client sends plans over its own session until ctx is done.
func client(ctx context.Context, i int, url string, kinds []string, o options, r *report) {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	name := fmt.Sprintf("soak-%d", i)
	cs, err := session(ctx, name, url, tokenMixed)
	if err != nil {
		return
	}
	defer func() { cs.Close() }()
	for ctx.Err() == nil {
		kind := kinds[rng.IntN(len(kinds))]
		code, d, err := call(cs, plans[kind], o, r)
		r.add(kind, code, d)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "closed") {
			cs.Close()
			if cs, err = session(ctx, name, url, tokenMixed); err != nil {
				return
			}
		}
	}
}

// session opens an MCP session at url with a bearer token.
func session(ctx context.Context, name, url, token string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{token}}
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// The clients' tokens: the hostile ones share one credential, the mixed
// ones another, the innocent client has its own; orchestra shares its
// evaluation workers among callers.
const (
	tokenMixed    = "soak-mixed-token"
	tokenHostile  = "soak-hostile-token"
	tokenInnocent = "soak-innocent-token"
)

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// call sends one plan and returns the answer's code and how long it took,
// counting it as sent and answered (and lost past the call timeout).
func call(cs *mcp.ClientSession, args string, o options, r *report) (string, time.Duration, error) {
	callCtx, cancel := context.WithTimeout(context.Background(), o.callTimout)
	defer cancel()
	r.sent.Add(1)
	t0 := time.Now()
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: json.RawMessage(args)})
	d := time.Since(t0)
	r.received.Add(1)
	if errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		r.lost.Add(1)
	}
	return answerCode(res, err), d, err
}

// hostileClient replays the hostile inputs, one after another, until ctx
// is done, each answer checked against what it must be.
func hostileClient(ctx context.Context, i int, url string, inputs map[string]hostileInput, o options, r *report) {
	cs, err := session(ctx, fmt.Sprintf("hostile-%d", i), url, tokenHostile)
	if err != nil {
		return
	}
	defer cs.Close()
	kinds := slices.Sorted(mapsKeys(inputs))
	for n := i; ctx.Err() == nil; n++ {
		kind := kinds[n%len(kinds)]
		code, d, _ := call(cs, inputs[kind].args, o, r)
		if inputs[kind].want == "success" && code == "success" {
			code = "success (as it must)"
		}
		r.add("hostile", code, d)
		r.addHostile(kind, code)
	}
}

// innocentClient sends a small good plan at a time until ctx is done; the
// latencies of the requests it starts before loadAt are its baseline.
func innocentClient(ctx context.Context, url string, loadAt time.Time, o options, r *report) {
	cs, err := session(ctx, "innocent", url, tokenInnocent)
	if err != nil {
		return
	}
	defer cs.Close()
	for ctx.Err() == nil {
		loaded := time.Now().After(loadAt)
		code, d, _ := call(cs, plans["good"], o, r)
		r.add("innocent", code, d)
		r.addInnocent(loaded, d)
	}
}

// gzipBomb answers with a small gzip body that inflates to 1 GiB of zeros.
func gzipBomb(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Set("Content-Type", "text/plain")
	zw := gzip.NewWriter(w)
	zeros := make([]byte, 1<<20)
	for range 1024 {
		if _, err := zw.Write(zeros); err != nil {
			return
		}
	}
	zw.Close()
}

// answerCode is "success", the first error code of the envelope, or
// "protocol_error".
func answerCode(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return "protocol_error"
	}
	if !res.IsError {
		return "success"
	}
	data, _ := json.Marshal(res.StructuredContent)
	var env struct {
		Artifact struct {
			Errors           []struct{ Code string } `json:"errors"`
			ValidationErrors []struct{ Code string } `json:"validation_errors"`
		} `json:"artifact"`
	}
	_ = json.Unmarshal(data, &env)
	if len(env.Artifact.ValidationErrors) > 0 {
		return env.Artifact.ValidationErrors[0].Code
	}
	if len(env.Artifact.Errors) > 0 {
		return env.Artifact.Errors[0].Code
	}
	return "error_without_code"
}

// killer kills the fixture server's process every interval and returns
// how many times it did.
func killer(ctx context.Context, app *server.App, every time.Duration) int {
	if every <= 0 {
		<-ctx.Done()
		return 0
	}
	t := time.NewTicker(every)
	defer t.Stop()
	kills := 0
	for {
		select {
		case <-ctx.Done():
			return kills
		case <-t.C:
			for _, st := range app.Downstream() {
				if st.PID > 0 && syscall.Kill(st.PID, syscall.SIGKILL) == nil {
					kills++
				}
			}
		}
	}
}

// rss returns the resident set size of this process, from /proc.
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}
