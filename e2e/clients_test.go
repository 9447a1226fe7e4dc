package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
)

var updateMatrix = flag.Bool("update-matrix", false, "rewrite the client compatibility matrix in RELIABILITY.md from this run")

// The transports of the matrix, in its column order.
var matrixTransports = []string{"stdio", "stateful HTTP", "stateless HTTP"}

// A matrixClient is an MCP client library the matrix drives.
type matrixClient struct {
	name     string
	versions []string // "" is the library's default
	// plan lists the tools and runs a plan, returning the negotiated
	// protocol version.
	plan func(ctx context.Context, target matrixTarget, version string) (string, error)
	// cancel runs a plan whose step waits and cancels the call once the
	// step has started.
	cancel func(ctx context.Context, target matrixTarget) error
	// how says how the client cancels.
	how string
}

// A matrixTarget is where a client reaches orchestra: the command of a
// stdio server, or the URL of an HTTP one.
type matrixTarget struct {
	transport string
	command   []string
	url       string
}

var allVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// TestClientMatrix drives every client library at every protocol version
// it offers over stdio, stateful and stateless Streamable HTTP: each lists
// the tools and runs a plan, and each cancels a running plan the way it
// does, which must stop the plan (its record not a success, its step
// cancelled well before the step's own end). The outcome is the matrix in
// RELIABILITY.md; a stale matrix fails (rewrite it with -update-matrix).
func TestClientMatrix(t *testing.T) {
	clients := []matrixClient{goSDKClient(), mcpGoClient()}
	node, nodeErr := exec.LookPath("node")
	clientsDir, _ := filepath.Abs(filepath.Join("testdata", "clients"))
	if _, err := os.Stat(filepath.Join(clientsDir, "node_modules", "@modelcontextprotocol", "client")); err != nil || nodeErr != nil {
		msg := "the TypeScript clients are not installed: run `npm ci` in testdata/clients (and install node)"
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal(msg)
		}
		t.Log(msg + "; checking the Go clients only, and not the matrix in RELIABILITY.md")
	} else {
		clients = append(clients,
			tsClient(node, clientsDir, "v1", "TypeScript SDK 1.x", []string{"2025-11-25"}),
			tsClient(node, clientsDir, "v2", "TypeScript SDK 2.x", allVersions[:5]))
	}

	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixtureserver")
	if out, err := exec.Command("go", "build", "-o", fixture, "./testdata/fixtureserver").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture server: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("mcpServers:\n  fx:\n    command: %q\n", fixture)), 0o644); err != nil {
		t.Fatal(err)
	}
	targets := map[string]matrixTarget{
		"stdio":          {transport: "stdio", command: []string{orchestraBin, "serve", "--config", cfg, "--store", "memory"}},
		"stateful HTTP":  {transport: "http", url: serveForMatrix(t, cfg, "--store", "memory")},
		"stateless HTTP": {transport: "http", url: serveForMatrix(t, cfg, "--store", "memory", "--stateless")},
	}

	type cell struct{ client, version, transport string }
	var mu sync.Mutex
	results := map[cell]string{}
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(4)
	for _, c := range clients {
		for _, v := range c.versions {
			for _, tr := range matrixTransports {
				g.Go(func() error {
					ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
					defer cancel()
					got, err := c.plan(ctx, targets[tr], v)
					want := v
					if want == "" {
						want = "2026-07-28" // every default tried negotiates the newest
					}
					mark := "✓"
					switch {
					case err != nil:
						mark = "✗"
						t.Errorf("%s at %s over %s: %v", c.name, versionName(v), tr, err)
					case got != want:
						mark = "✗ " + got
						t.Errorf("%s at %s over %s negotiated %s", c.name, versionName(v), tr, got)
					}
					mu.Lock()
					results[cell{c.name, v, tr}] = mark
					mu.Unlock()
					return nil
				})
			}
		}
	}
	g.Wait()

	// Cancellation, one at a time: each reads the newest record.
	cancelled := map[cell]string{}
	for _, c := range clients {
		for _, tr := range matrixTransports {
			mark := "✓"
			if err := cancelCell(t, c, tr, cfg, dir); err != nil {
				mark = "✗"
				t.Errorf("%s cancelling over %s: %v", c.name, tr, err)
			}
			cancelled[cell{c.name, "", tr}] = mark
		}
	}

	if len(clients) < 4 {
		return
	}
	var b strings.Builder
	b.WriteString("| client | protocol version | stdio | stateful HTTP | stateless HTTP |\n|---|---|---|---|---|\n")
	for _, c := range clients {
		for _, v := range c.versions {
			fmt.Fprintf(&b, "| %s | %s |", c.name, versionName(v))
			for _, tr := range matrixTransports {
				fmt.Fprintf(&b, " %s |", results[cell{c.name, v, tr}])
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\n| client | cancels by | stdio | stateful HTTP | stateless HTTP |\n|---|---|---|---|---|\n")
	for _, c := range clients {
		fmt.Fprintf(&b, "| %s | %s |", c.name, c.how)
		for _, tr := range matrixTransports {
			fmt.Fprintf(&b, " %s |", cancelled[cell{c.name, "", tr}])
		}
		b.WriteString("\n")
	}
	checkGenerated(t, "RELIABILITY.md", "clients", b.String(), *updateMatrix, "go test ./e2e -run TestClientMatrix -update-matrix")
}

func versionName(v string) string {
	if v == "" {
		return "default"
	}
	return v
}

// checkGenerated compares the generated section name of file with want,
// or rewrites it when update is set.
func checkGenerated(t *testing.T, file, name, want string, update bool, how string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?s)<!-- BEGIN GENERATED: ` + name + ` -->\n(.*?)<!-- END GENERATED: ` + name + ` -->`)
	m := re.FindSubmatchIndex(data)
	if m == nil {
		t.Fatalf("%s has no generated section %q", file, name)
	}
	if got := string(data[m[2]:m[3]]); got == want {
		return
	} else if !update {
		t.Fatalf("the %q section of %s is stale; run: %s\nwant:\n%s\ngot:\n%s", name, file, how, want, got)
	}
	out := append(append(slices.Clone(data[:m[2]]), want...), data[m[3]:]...)
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// serveForMatrix starts orchestra serve --http on a free loopback port
// until the test ends and returns its /mcp URL.
func serveForMatrix(t *testing.T, cfg string, args ...string) string {
	t.Helper()
	cmd := exec.Command(orchestraBin, append([]string{"serve", "--config", cfg, "--http", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if url, ok := strings.CutPrefix(sc.Text(), "orchestra: serving MCP at "); ok {
			go io.Copy(io.Discard, stderr)
			return url
		}
	}
	t.Fatalf("orchestra serve --http did not say where it serves")
	return ""
}

// waitPlan is a plan whose one step waits a minute, for cancelling.
var waitPlan = map[string]any{"plan": map[string]any{"steps": []any{
	map[string]any{"id": "w", "tool": "fx__sleep", "arguments": map[string]any{"ms": 60000}},
}}}

// matrixPlan is the plan every cell runs.
var matrixPlan = map[string]any{
	"plan": map[string]any{"steps": []any{map[string]any{"id": "a", "tool": "render", "arguments": map[string]any{
		"template": "hello {{.who}}", "values": map[string]any{"who": "$bindings.who"},
	}}}},
	"bindings": map[string]any{"who": "matrix"},
}

// checkPlanResult checks a plan's structured content and its text blocks:
// the summary, then, for a client of a version before structured content,
// the same envelope as JSON.
func checkPlanResult(version string, isError bool, structured any, texts []string) error {
	data, _ := json.Marshal(structured)
	var env struct {
		ArtifactID string `json:"artifact_id"`
		Artifact   struct {
			Status string `json:"status"`
			Steps  []struct {
				Output struct {
					Text string `json:"text"`
				} `json:"output"`
			} `json:"steps"`
		} `json:"artifact"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return err
	}
	if isError || env.Artifact.Status != "success" || len(env.Artifact.Steps) != 1 || env.Artifact.Steps[0].Output.Text != "hello matrix" {
		return fmt.Errorf("the plan did not run: %s", data)
	}
	// The compact response is one text block; a client older than
	// structured content also gets the envelope as JSON in a second one.
	switch {
	case len(texts) == 2 && (!json.Valid([]byte(texts[1])) || !strings.Contains(texts[1], env.ArtifactID)):
		return fmt.Errorf("the second text block is not the envelope as JSON: %q", texts)
	case len(texts) == 1 && version < "2025-06-18":
		return fmt.Errorf("a %s client gets no JSON text block: %q", version, texts)
	case len(texts) != 1 && len(texts) != 2:
		return fmt.Errorf("want one or two text blocks: %q", texts)
	}
	return nil
}

func goSDKClient() matrixClient {
	connect := func(ctx context.Context, target matrixTarget, version string, copts *mcp.ClientOptions) (*mcp.ClientSession, error) {
		var tr mcp.Transport = &mcp.StreamableClientTransport{Endpoint: target.url}
		if target.transport == "stdio" {
			tr = &mcp.CommandTransport{Command: exec.Command(target.command[0], target.command[1:]...)}
		}
		var opts *mcp.ClientSessionOptions
		if version != "" {
			opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
		}
		return mcp.NewClient(&mcp.Implementation{Name: "matrix", Version: "1"}, copts).Connect(ctx, tr, opts)
	}
	return matrixClient{
		name:     "go-sdk " + moduleVersion("github.com/modelcontextprotocol/go-sdk"),
		versions: allVersions,
		how:      "notifications/cancelled",
		plan: func(ctx context.Context, target matrixTarget, version string) (string, error) {
			cs, err := connect(ctx, target, version, nil)
			if err != nil {
				return "", err
			}
			defer cs.Close()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				return "", err
			}
			if !slices.ContainsFunc(tools.Tools, func(t *mcp.Tool) bool { return t.Name == "agent_orchestrate" }) {
				return "", fmt.Errorf("tools/list has no agent_orchestrate")
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: matrixPlan})
			if err != nil {
				return "", err
			}
			var texts []string
			for _, c := range res.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					texts = append(texts, tc.Text)
				}
			}
			v := cs.InitializeResult().ProtocolVersion
			return v, checkPlanResult(v, res.IsError, res.StructuredContent, texts)
		},
		cancel: func(ctx context.Context, target matrixTarget) error {
			started := make(chan struct{}, 1)
			cs, err := connect(ctx, target, "", &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					if strings.Contains(req.Params.Message, "started") {
						select {
						case started <- struct{}{}:
						default:
						}
					}
				},
			})
			if err != nil {
				return err
			}
			defer cs.Close()
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-started:
					cancel()
				case <-callCtx.Done():
				}
			}()
			params := &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: waitPlan}
			params.SetProgressToken("matrix")
			if _, err := cs.CallTool(callCtx, params); err == nil {
				return fmt.Errorf("the cancelled call answered")
			}
			return nil
		},
	}
}

func mcpGoClient() matrixClient {
	connect := func(ctx context.Context, target matrixTarget, version string) (*mcpgo.Client, error) {
		var opts []mcpgo.ClientOption
		if version != "" {
			opts = append(opts, mcpgo.WithProtocolVersion(version))
		}
		var tr mcpgotransport.Interface
		if target.transport == "stdio" {
			tr = mcpgotransport.NewStdio(target.command[0], nil, target.command[1:]...)
		} else {
			h, err := mcpgotransport.NewStreamableHTTP(target.url)
			if err != nil {
				return nil, err
			}
			tr = h
		}
		c := mcpgo.NewClient(tr, opts...)
		if err := c.Start(ctx); err != nil {
			return nil, err
		}
		init := mcpgomcp.InitializeRequest{}
		init.Params.ClientInfo = mcpgomcp.Implementation{Name: "matrix", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	return matrixClient{
		name:     "mcp-go " + moduleVersion("github.com/mark3labs/mcp-go"),
		versions: append([]string{""}, allVersions...),
		how:      "dropping the HTTP request; notifications/cancelled on stdio",
		plan: func(ctx context.Context, target matrixTarget, version string) (string, error) {
			c, err := connect(ctx, target, version)
			if err != nil {
				return "", err
			}
			defer c.Close()
			tools, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
			if err != nil {
				return "", err
			}
			if !slices.ContainsFunc(tools.Tools, func(t mcpgomcp.Tool) bool { return t.Name == "agent_orchestrate" }) {
				return "", fmt.Errorf("tools/list has no agent_orchestrate")
			}
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name = "agent_orchestrate"
			req.Params.Arguments = matrixPlan
			res, err := c.CallTool(ctx, req)
			if err != nil {
				return "", err
			}
			var texts []string
			for _, content := range res.Content {
				if tc, ok := content.(mcpgomcp.TextContent); ok {
					texts = append(texts, tc.Text)
				}
			}
			v := c.ProtocolVersion()
			return v, checkPlanResult(v, res.IsError, res.StructuredContent, texts)
		},
		cancel: func(ctx context.Context, target matrixTarget) error {
			c, err := connect(ctx, target, "")
			if err != nil {
				return err
			}
			defer c.Close()
			started := make(chan struct{}, 1)
			c.OnNotification(func(n mcpgomcp.JSONRPCNotification) {
				if n.Method == "notifications/progress" && strings.Contains(fmt.Sprint(n.Params.AdditionalFields["message"]), "started") {
					select {
					case started <- struct{}{}:
					default:
					}
				}
			})
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-started:
					cancel()
				case <-callCtx.Done():
				}
			}()
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name = "agent_orchestrate"
			req.Params.Arguments = waitPlan
			req.Params.Meta = &mcpgomcp.Meta{ProgressToken: "matrix"}
			res, err := c.CallTool(callCtx, req)
			if err == nil {
				return fmt.Errorf("the cancelled call answered: %+v", res)
			}
			return nil
		},
	}
}

// tsClient drives testdata/clients/client.mjs with one of the TypeScript
// SDK's clients.
func tsClient(node, dir, sdk, name string, versions []string) matrixClient {
	pkg := map[string]string{"v1": "sdk", "v2": "client"}[sdk]
	var meta struct{ Version string }
	if data, err := os.ReadFile(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "package.json")); err == nil {
		json.Unmarshal(data, &meta)
	}
	run := func(ctx context.Context, target matrixTarget, version, mode string) (string, error) {
		arg := target.url
		if target.transport == "stdio" {
			data, _ := json.Marshal(target.command)
			arg = string(data)
		}
		cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), sdk, target.transport, arg, version, mode)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("node: %v\n%s", err, out)
		}
		var r struct {
			OK      bool   `json:"ok"`
			Version string `json:"version"`
			Error   string `json:"error"`
			Outcome string `json:"outcome"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return "", fmt.Errorf("node printed %q", out)
		}
		if !r.OK {
			return r.Version, fmt.Errorf("%s%s", r.Error, r.Outcome)
		}
		return r.Version, nil
	}
	return matrixClient{
		name:     fmt.Sprintf("%s (%s %s)", name, "@modelcontextprotocol/"+pkg, meta.Version),
		versions: versions,
		how:      "notifications/cancelled (AbortSignal)",
		plan: func(ctx context.Context, target matrixTarget, version string) (string, error) {
			return run(ctx, target, version, "plan")
		},
		cancel: func(ctx context.Context, target matrixTarget) error {
			_, err := run(ctx, target, versions[0], "cancel")
			return err
		},
	}
}

// cancelCell has client c cancel a running plan over transport tr on an
// orchestra of its own, then checks the record: not a success, its step
// cancelled well before the step's minute was up.
func cancelCell(t *testing.T, c matrixClient, tr, cfg, dir string) error {
	t.Helper()
	db := filepath.Join(dir, fmt.Sprintf("cancel-%d.db", time.Now().UnixNano()))
	target := matrixTarget{transport: "stdio", command: []string{orchestraBin, "serve", "--config", cfg, "--store", db}}
	switch tr {
	case "stateful HTTP":
		target = matrixTarget{transport: "http", url: serveForMatrix(t, cfg, "--store", db)}
	case "stateless HTTP":
		target = matrixTarget{transport: "http", url: serveForMatrix(t, cfg, "--store", db, "--stateless")}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := c.cancel(ctx, target); err != nil {
		return err
	}
	// The server records the run as it ends; the stdio server may still be
	// exiting.
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		st, err := store.Open(ctx, db, store.Options{})
		if err == nil {
			runs, _, lerr := st.List(ctx, store.ListOptions{})
			var steps []store.StepRecord
			if lerr == nil && len(runs) == 1 && runs[0].Status != store.StatusRunning {
				_, steps, lerr = st.Get(ctx, runs[0].ExecID)
			}
			last = fmt.Sprintf("%d runs, %+v, %v", len(runs), runs, lerr)
			st.Close()
			if lerr == nil && len(runs) == 1 && runs[0].Status != store.StatusRunning {
				switch {
				case runs[0].Status == store.StatusSuccess:
					return fmt.Errorf("the cancelled run is recorded as a success")
				case len(steps) != 1 || steps[0].Status != "cancelled" || steps[0].DurationMS >= 30000:
					return fmt.Errorf("step records %+v: want the step cancelled early", steps)
				}
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no finished run in the record (%v; %s)", err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// moduleVersion is the version of module path that go.mod requires.
func moduleVersion(path string) string {
	data, _ := os.ReadFile("go.mod")
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "(unknown)"
}

// TestInputSchemaAgreesWithBehaviour validates inputs of agent_orchestrate
// against its published input schema with Ajv in strict mode, as strict
// clients do, and sends each to orchestra: the schema compiles strictly,
// what it refuses orchestra refuses (no bare plan at the top level, no
// unknown field), and what it accepts orchestra runs, but for one rule the
// schema does not say: exactly one of plan, prompt or resume. That rule
// would be a top-level oneOf, which the model APIs refuse (Claude Code
// drops such a tool); the description says it and orchestra checks it when
// a call arrives.
func TestInputSchemaAgreesWithBehaviour(t *testing.T) {
	node, err := exec.LookPath("node")
	dir, _ := filepath.Abs(filepath.Join("testdata", "clients"))
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "ajv")); serr != nil || err != nil {
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal("ajv is not installed: run `npm ci` in testdata/clients")
		}
		t.Skip("ajv is not installed: run `npm ci` in testdata/clients")
	}
	steps := []any{map[string]any{"tool": "render", "arguments": map[string]any{"template": "x"}}}
	inputs := []map[string]any{
		{"plan": map[string]any{"steps": steps}, "dry_run": true},
		{"prompt": "say hi"},
		{"plan": map[string]any{"steps": steps}, "prompt": "say hi"},
		{"dry_run": true},
		{"steps": steps},
		{"type": "tool_calls", "calls": []any{}},
		{"plan": map[string]any{"steps": steps}, "dryrun": true},
	}
	// notOneOf are the inputs that break only "exactly one of plan, prompt
	// or resume": the schema takes them, orchestra refuses them.
	notOneOf := map[int]bool{2: true, 3: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "schema", Version: "1"}, nil).Connect(t.Context(),
		&mcp.CommandTransport{Command: exec.Command(orchestraBin, "serve", "--store", "memory")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	for _, tool := range tools.Tools {
		if tool.Name == "agent_orchestrate" {
			schema = tool.InputSchema
		}
	}
	in, _ := json.Marshal(map[string]any{"schema": schema, "inputs": inputs})
	cmd := exec.Command(node, filepath.Join(dir, "schema.mjs"))
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var verdict struct {
		Valid []bool `json:"valid"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &verdict); err != nil || verdict.Error != "" || len(verdict.Valid) != len(inputs) {
		t.Fatalf("Ajv (strict) on agent_orchestrate's input schema: %s", out)
	}
	for i, input := range inputs {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: input})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res.StructuredContent)
		// The prompt has no planner here; anything but a refused request
		// means orchestra took the input.
		refused := strings.Contains(string(data), `"code":"invalid_request"`) || strings.Contains(string(data), `"code":"unknown_field"`)
		if want := !verdict.Valid[i] || notOneOf[i]; refused != want || notOneOf[i] && !verdict.Valid[i] {
			t.Errorf("input %v: the schema says valid=%v, orchestra refused=%v:\n%.600s", input, verdict.Valid[i], refused, data)
		}
	}
}

// TestTSClientOversizedRequest sends a 4.5 MB plan over stdio from the
// TypeScript clients, over server.max_request_bytes: the client gets an
// error naming the limit (its request timeout, 30 s, would fail the test)
// and the next plan runs.
func TestTSClientOversizedRequest(t *testing.T) {
	node, dir := tsClients(t)
	target := matrixTarget{transport: "stdio", command: []string{orchestraBin, "serve", "--store", "memory"}}
	for _, c := range stdioClients {
		t.Run(c.sdk+"/"+c.version, func(t *testing.T) {
			data, _ := json.Marshal(target.command)
			var r struct {
				MS int `json:"ms"`
			}
			runClientMJS(t, node, dir, c, string(data), "oversized", &r)
			t.Logf("%s %s: answered in %d ms", c.sdk, c.version, r.MS)
		})
	}
}

// TestTSClientCallsExposedAgent: an exposed agent is on tools/list with
// its outputSchema, and the TypeScript clients call it directly with the
// ExecutionRequest shape; they validate its structuredContent against that
// schema (a mismatch throws) and see the agent's data.
func TestTSClientCallsExposedAgent(t *testing.T) {
	node, dir := tsClients(t)
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		return fakeopenai.Text(`{"count": 3, "summary": "three fruits"}`)
	})
	cfg := filepath.Join(t.TempDir(), "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte(`
planner: {provider: openai, model: fake, base_url: "`+fake.URL()+`", max_retries: -1}
agents:
  counter:
    description: Counts fruits.
    instructions: You count fruits.
    expose: true
    output_schema:
      type: object
      properties: {count: {type: integer}, summary: {type: string}}
      required: [count, summary]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	command, _ := json.Marshal([]string{orchestraBin, "serve", "--config", cfg, "--store", "memory"})
	for _, c := range stdioClients {
		t.Run(c.sdk+"/"+c.version, func(t *testing.T) {
			runClientMJS(t, node, dir, c, string(command), "agent:agent__counter", nil)
		})
	}
}

// stdioClients are the TypeScript SDKs client.mjs drives over stdio, each
// at the protocol versions it speaks.
var stdioClients = []sdkAtVersion{{"v1", "2025-11-25"}, {"v2", "2025-11-25"}, {"v2", "2026-07-28"}}

// sdkAtVersion is one TypeScript SDK ("v1" or "v2") at one protocol version.
type sdkAtVersion struct{ sdk, version string }

// runClientMJS runs client.mjs's mode with client c over stdio against the
// server command (JSON), within a minute, and fails t unless it prints
// {"ok": true, ...}; the line is decoded into r as well, unless r is nil.
func runClientMJS(t *testing.T, node, dir string, c sdkAtVersion, command, mode string, r any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"), c.sdk, "stdio", command, c.version, mode)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var ok struct {
		OK bool `json:"ok"`
	}
	if err := json.Unmarshal(out, &ok); err != nil || !ok.OK {
		t.Fatalf("%s: %s", c.sdk, out)
	}
	if r != nil {
		if err := json.Unmarshal(out, r); err != nil {
			t.Fatalf("%s: %v: %s", c.sdk, err, out)
		}
	}
}
