package hostile

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	updateReliability = flag.Bool("update", false, "rewrite the matrix section of RELIABILITY.md from the table of cases")
	baseline          = flag.Duration("baseline", 10*time.Second, "how long the innocent client runs alone before the cases")
)

// TestMain runs the test binary as the hostile downstream server when the
// orchestra under test starts it with -downstream.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-downstream" {
		os.Exit(downstreamMain())
	}
	os.Exit(m.Run())
}

// transport is where a request case goes.
type transport string

const (
	overStdio transport = "stdio"
	overHTTP  transport = "http"
)

// Tokens of the HTTP server's two static callers.
const (
	innocentToken = "innocent-caller-token"
	attackerToken = "attacker-caller-token"
)

// TestHostileMatrix runs every case of the matrix against real orchestra
// processes, each under prlimit --as=4GiB: orchestra serve over stdio and
// over Streamable HTTP for the request cases (each on both), an orchestra
// serve --http of its own for the key-set cases, the orchestra command
// for the file cases. Each case must be answered with the error it
// expects (or, within the limits, succeed), with an answer under 1 MiB;
// both serving processes must live through it and the stdio session must
// still run a plain plan after it. An innocent client with a token of its
// own calls a small plan over HTTP the whole time: every one of its calls
// must succeed. Its p95 latency during the cases against its p95 alone is
// measured and logged (a ratio within one run), not asserted: the machine
// is shared.
func TestHostileMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the hostile matrix runs for minutes")
	}
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit is not installed")
	}
	r, err := runMatrix(t)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.print(&b)
	t.Logf("the matrix, measured:\n%s", b.String())
	if r.innocentFails > 0 {
		t.Errorf("%d of the innocent client's calls failed during the cases", r.innocentFails)
	}
	if len(r.alone) == 0 || len(r.during) == 0 {
		t.Errorf("the innocent client made no calls alone (%d) or during the cases (%d)", len(r.alone), len(r.during))
	}
}

// TestReliabilityMatrix checks that RELIABILITY.md's matrix section is the
// one the table of cases makes; -update rewrites it.
func TestReliabilityMatrix(t *testing.T) {
	const path = "../../RELIABILITY.md"
	if *updateReliability {
		if err := rewriteReliability(path); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, matrixBegin), strings.Index(s, matrixEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s ... %s section", path, matrixBegin, matrixEnd)
	}
	if got, want := s[i+len(matrixBegin)+1:j], matrixMarkdown(); got != want {
		t.Errorf("RELIABILITY.md's matrix is not the table of cases; run go test ./e2e/hostile -run TestReliabilityMatrix -update")
	}
}

// harness is what the cases run against.
type harness struct {
	ctx        context.Context
	orchestra  string
	dir        string
	env        []string
	httpConfig string
	model      *modal
	jwks       *jwksFake
	stdio      *stdioClient
	http       *httpServer

	mu  sync.Mutex
	rss map[string]int64 // peak RSS of the processes, by name
}

func (h *harness) noteRSS(name string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rss[name] = max(h.rss[name], n)
}

// outcome is how an entry point answered a case.
type outcome struct {
	code  string   // an orchestra error code, "success", "jsonrpc:N", "http:N", "exit:N"
	codes []string // every code of an envelope: its validation errors, its errors
	text  string
	size  int
	exec  string // the run's exec id, when it paused
}

// call sends the arguments of agent_orchestrate over t.
func (h *harness) call(t transport, args string, timeout time.Duration) (outcome, error) {
	return h.send(t, func(id int) string { return callLine(id, args) }, nil, nil, timeout)
}

// send sends one message over t: line, or what stdin (stdio) or body
// (HTTP) write when set.
func (h *harness) send(t transport, line func(id int) string, stdin func(id int) io.Reader, body func() io.Reader, timeout time.Duration) (outcome, error) {
	if t == overStdio {
		id, ch := h.stdio.nextID()
		var r io.Reader
		if stdin != nil {
			r = stdin(id)
		} else {
			r = strings.NewReader(line(id) + "\n")
		}
		msg, err := h.stdio.send(r, ch, timeout)
		if err != nil {
			return outcome{}, err
		}
		return classify(msg), nil
	}
	var r io.Reader
	hd := mcpHeaders{method: "ping"} // what a slow or endless body starts as
	if body != nil {
		r = body()
	} else {
		l := line(1)
		hd = headersOf(l)
		r = strings.NewReader(modern(l))
	}
	status, data, err := h.http.post(h.ctx, attackerToken, r, hd, timeout)
	if err != nil && status == 0 {
		return outcome{}, err
	}
	out := classify(data)
	if out.code == "" || status != 200 && !strings.HasPrefix(out.code, "jsonrpc:") {
		out = outcome{code: fmt.Sprintf("http:%d", status), text: string(data), size: len(data)}
	}
	return out, nil
}

// classify reads a JSON-RPC response: its error's code, or the first
// error code of agent_orchestrate's envelope, or success.
func classify(msg []byte) outcome {
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent *struct {
				Artifact struct {
					Errors           []struct{ Code string } `json:"errors"`
					ValidationErrors []struct{ Code string } `json:"validation_errors"`
					Resume           *struct {
						ExecID string `json:"exec_id"`
					} `json:"resume"`
				} `json:"artifact"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return outcome{text: string(msg), size: len(msg)}
	}
	out := outcome{size: len(msg)}
	switch {
	case m.Error != nil:
		out.code, out.text = fmt.Sprintf("jsonrpc:%d", m.Error.Code), m.Error.Message
	case m.Result == nil:
		out.code = "success"
	default:
		for _, c := range m.Result.Content {
			out.text += c.Text + "\n"
		}
		out.code = "success"
		if sc := m.Result.StructuredContent; sc != nil {
			if sc.Artifact.Resume != nil {
				out.exec = sc.Artifact.Resume.ExecID
			}
			if m.Result.IsError {
				for _, e := range append(sc.Artifact.ValidationErrors, sc.Artifact.Errors...) {
					out.codes = append(out.codes, e.Code)
				}
				if len(out.codes) > 0 {
					out.code = out.codes[0]
				}
			}
		} else if m.Result.IsError {
			out.code = "tool_error_without_envelope"
		}
	}
	return out
}

// result is one case run on one transport.
type result struct {
	c      hcase
	t      string
	out    outcome
	fail   string // why it failed; "" when it passed
	took   time.Duration
	notRun bool
}

// report is what the matrix run measured.
type report struct {
	results       []result
	alone, during []time.Duration // the innocent client's latencies
	innocentFails int
	rss           map[string]int64
	wall          time.Duration
}

func runMatrix(t *testing.T) (*report, error) {
	started := time.Now()
	ctx := t.Context()
	dir := t.TempDir()
	orchestra := filepath.Join(dir, "orchestra")
	build := exec.CommandContext(ctx, "go", "build", "-o", orchestra, "github.com/orchestra-mcp/orchestra")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building orchestra: %w\n%s", err, out)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	modelSrv, model := newModel()
	defer modelSrv.Close()
	jwks, err := newJWKS()
	if err != nil {
		return nil, err
	}
	defer jwks.Close()
	h := &harness{ctx: ctx, orchestra: orchestra, dir: dir, model: model, jwks: jwks, rss: map[string]int64{},
		env: []string{"HOSTILE_INNOCENT_TOKEN=" + innocentToken, "HOSTILE_ATTACKER_TOKEN=" + attackerToken, "OPENAI_API_KEY=none", "XDG_STATE_HOME=" + dir}}
	stdioConfig := filepath.Join(dir, "stdio.yaml")
	h.httpConfig = filepath.Join(dir, "http.yaml")
	if err := os.WriteFile(stdioConfig, []byte(configYAML(self, modelSrv.URL, "")), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(h.httpConfig, []byte(configYAML(self, modelSrv.URL, jwks.URL)), 0o600); err != nil {
		return nil, err
	}
	if h.stdio, err = startStdio(ctx, orchestra, stdioConfig, h.env); err != nil {
		return nil, err
	}
	defer h.stdio.stop()
	if h.http, err = startHTTP(ctx, orchestra, h.httpConfig, h.env); err != nil {
		return nil, err
	}
	defer h.http.stop()

	r := &report{}
	inn := startInnocent(ctx, h.http.url)
	select { // the innocent client alone
	case <-time.After(*baseline):
	case <-ctx.Done():
	}
	inn.phase(true)
	for _, c := range append(requestCases(), otherCases()...) {
		ts := []string{"cli"}
		if c.run == nil {
			ts = []string{string(overStdio), string(overHTTP)}
		}
		for _, tr := range ts {
			t.Run(c.name()+"/"+tr, func(t *testing.T) {
				res := h.runCase(c, tr)
				r.results = append(r.results, res)
				if res.fail != "" {
					t.Errorf("answered %s in %s: %s", res.out.code, res.took.Round(time.Millisecond), res.fail)
				}
			})
		}
	}
	r.alone, r.during, r.innocentFails = inn.stop()
	h.noteRSS("serve (stdio)", h.stdio.peakRSS())
	h.noteRSS("serve --http", h.http.peakRSS())
	r.rss = h.rss
	r.wall = time.Since(started)
	return r, nil
}

// runCase runs c on t and judges the answer.
func (h *harness) runCase(c hcase, t string) result {
	res := result{c: c, t: t}
	start := time.Now()
	defer func() { res.took = time.Since(start) }()
	if c.before != nil {
		c.before(h)
		defer h.model.set("")
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 45 * time.Second
	}
	if c.run != nil {
		res.out = c.run(h)
	} else {
		tr := transport(t)
		line := c.line
		if c.args != nil {
			vars := map[string]string{}
			if c.setup != nil {
				v, err := c.setup(h, tr)
				if err != nil {
					res.fail = "setting up: " + err.Error()
					return res
				}
				vars = v
			}
			args := c.args()
			for k, v := range vars {
				args = strings.ReplaceAll(args, "{{"+k+"}}", v)
			}
			line = func(id int) string { return callLine(id, args) }
		}
		out, err := h.send(tr, line, c.stdin, c.body, timeout)
		if err != nil {
			res.fail = err.Error()
		}
		res.out = out
	}
	res.took = time.Since(start)
	if res.fail == "" {
		res.fail = judge(c, res.out)
	}
	// Whatever the case did, both servers live and serve.
	for name, s := range map[string]*served{"serve (stdio)": h.stdio.served, "serve --http": h.http.served} {
		if !s.alive() {
			res.fail = strings.TrimSpace(res.fail + "; " + name + " died: " + lastLines(s.stderr.String(), 5))
		}
	}
	if h.stdio.alive() {
		if out, err := h.call(overStdio, innocentPlan, 30*time.Second); err != nil || out.code != "success" {
			res.fail = strings.TrimSpace(fmt.Sprintf("%s; the stdio session no longer serves a plain plan: %v %s %.200s", res.fail, err, out.code, out.text))
		}
	}
	res.fail = strings.TrimPrefix(res.fail, "; ")
	return res
}

// judge says why out is not what c expects, or "".
func judge(c hcase, out outcome) string {
	ok := false
	for _, w := range c.want {
		for _, code := range append([]string{out.code}, out.codes...) {
			if code == w || strings.HasSuffix(w, ":") && strings.HasPrefix(code, w) {
				ok = true
			}
		}
	}
	if !ok {
		return fmt.Sprintf("answered %q %v, want one of %v: %.300s", out.code, out.codes, c.want, out.text)
	}
	if c.hint != "" && !strings.Contains(strings.ToLower(out.text), strings.ToLower(c.hint)) {
		return fmt.Sprintf("the answer does not say %q: %.300s", c.hint, out.text)
	}
	if out.size > 1<<20 && out.code != "success" {
		return fmt.Sprintf("an error of %d bytes", out.size)
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// configYAML is the configuration of the serving orchestras: the
// hostile downstream server, the fake model as planner and agent model,
// and, with jwks set, authentication (two static tokens and JWTs).
func configYAML(self, model, jwks string) string {
	var b strings.Builder
	b.WriteString("server:\n  body_timeout: 2s\n")
	if jwks != "" {
		fmt.Fprintf(&b, `  rate_limit: {requests_per_second: 100, burst: 50}
  auth:
    tokens:
      - {name: innocent, token_env: HOSTILE_INNOCENT_TOKEN}
      - {name: attacker, token_env: HOSTILE_ATTACKER_TOKEN}
    jwt: {issuer: %q, audience: %q, jwks_url: %q}
`, jwtIssuer, jwtAudience, jwks)
	}
	fmt.Fprintf(&b, `limits:
  planner_attempts: 1
  step_timeout: 60s
planner:
  provider: openai
  model: m
  base_url: %s/v1
  timeout: 60s
  max_retries: -1
  max_response_bytes: 524288
mcpServers:
  hostile:
    command: %q
    args: ["-downstream"]
agents:
  probe:
    description: A probe agent that says hello.
    instructions: Say hello.
`, model, self)
	return b.String()
}

// innocentPlan is what the innocent client sends: a json_query step and a
// render step.
const innocentPlan = `{"plan":{"steps":[{"id":"q","tool":"json_query","arguments":{"query":".a","input":{"a":"hi"}}},{"id":"r","tool":"render","arguments":{"template":"{{.v}}!","values":{"v":"$q.output.result"}}}]}}`

func (r *report) ratio() float64 {
	a, b := percentile(r.alone, 0.95), percentile(r.during, 0.95)
	if a == 0 {
		return 0
	}
	return float64(b) / float64(a)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func (r *report) print(w io.Writer) {
	passed := 0
	for _, res := range r.results {
		if res.fail == "" {
			passed++
		}
	}
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| cases run (a case on each transport it applies to) | %d |\n", len(r.results))
	fmt.Fprintf(w, "| answered as expected, every process alive | %d |\n", passed)
	fmt.Fprintf(w, "| innocent client p50 / p95 alone | %s / %s (%d calls) |\n", percentile(r.alone, 0.5).Round(10*time.Microsecond), percentile(r.alone, 0.95).Round(10*time.Microsecond), len(r.alone))
	fmt.Fprintf(w, "| innocent client p50 / p95 during the cases | %s / %s (%d calls, %d failed) |\n", percentile(r.during, 0.5).Round(10*time.Microsecond), percentile(r.during, 0.95).Round(10*time.Microsecond), len(r.during), r.innocentFails)
	fmt.Fprintf(w, "| p95 ratio | %.2f |\n", r.ratio())
	for _, name := range slices.Sorted(maps.Keys(r.rss)) {
		fmt.Fprintf(w, "| peak RSS, %s | %.1f MiB |\n", name, float64(r.rss[name])/(1<<20))
	}
	fmt.Fprintf(w, "| wall time | %s |\n", r.wall.Round(time.Second))
}
