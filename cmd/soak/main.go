// Command soak loads an in-process orchestra over Streamable HTTP on
// loopback for a bounded time and reports whether every request got its
// answer.
//
// N clients, each with its own MCP session, send a mix of good, failing and
// hostile plans, some of them calling a downstream fixture server that is
// killed every few seconds (and restarted by orchestra). At the end it
// prints requests sent, answers received, errors by code, p50/p99 latency,
// and goroutines and RSS at start and end. With -check it exits non-zero
// unless every request was answered exactly once and goroutines did not
// grow beyond -max-goroutine-growth. Run it from the repository root:
//
//	go run ./cmd/soak -duration 60s -clients 32
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
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
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	duration   time.Duration
	clients    int
	killEvery  time.Duration
	check      bool
	maxGrowth  int
	callTimout time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long clients send requests")
	fs.IntVar(&o.clients, "clients", 32, "concurrent HTTP clients, each with its own session")
	fs.DurationVar(&o.killEvery, "kill-every", 3*time.Second, "how often the downstream fixture server is killed")
	fs.BoolVar(&o.check, "check", false, "exit 1 unless every request was answered and goroutines did not grow")
	fs.IntVar(&o.maxGrowth, "max-goroutine-growth", 50, "with -check: goroutines allowed at the end beyond those at the start")
	fs.DurationVar(&o.callTimout, "call-timeout", 60*time.Second, "a request not answered within this counts as lost")
	if err := fs.Parse(args); err != nil {
		return 2
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

func (r *report) problems(o options) []string {
	var p []string
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
}

func mapsKeys(m map[string]int) func(func(string) bool) {
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

func soak(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "orchestra-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fixture := filepath.Join(dir, "fixtureserver")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", fixture, "./testdata/fixtureserver").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the fixture server (run from the repository root): %v\n%s", err, out)
	}

	cfg := config.Default()
	cfg.MCPServers = map[string]mcpserver.ServerConfig{"fx": {Command: fixture}}
	cfg.Server.RateLimit.RequestsPerSecond = -1 // one address sends everything here
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

	r := &report{codes: map[string]int{}, kinds: map[string]int{}}
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
	runCtx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range o.clients {
		wg.Go(func() { client(runCtx, i, url, kinds, o, r) })
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
	c := mcp.NewClient(&mcp.Implementation{Name: fmt.Sprintf("soak-%d", i), Version: "1"}, nil)
	var cs *mcp.ClientSession
	connect := func() bool {
		var err error
		cs, err = c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		return err == nil
	}
	if !connect() {
		return
	}
	defer func() { cs.Close() }()
	for ctx.Err() == nil {
		kind := kinds[rng.IntN(len(kinds))]
		callCtx, cancel := context.WithTimeout(context.Background(), o.callTimout)
		r.sent.Add(1)
		t0 := time.Now()
		res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: json.RawMessage(plans[kind])})
		d := time.Since(t0)
		lost := errors.Is(callCtx.Err(), context.DeadlineExceeded)
		cancel()
		r.received.Add(1)
		if lost {
			r.lost.Add(1)
		}
		code := answerCode(res, err)
		r.add(kind, code, d)
		if err != nil && !lost && strings.Contains(err.Error(), "closed") {
			cs.Close()
			if !connect() {
				return
			}
		}
	}
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
