package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gonum.org/v1/plot/plotter"
)

// buildBinaries builds orchestra and the fixture server into dir.
func buildBinaries(ctx context.Context, dir string) (orchestra, fixture string, err error) {
	root, err := orchestraDir()
	if err != nil {
		return "", "", err
	}
	orchestra = filepath.Join(dir, "orchestra")
	fixture = filepath.Join(dir, "fixtureserver")
	for _, b := range []struct{ out, pkg string }{{orchestra, "."}, {fixture, "./testdata/fixtureserver"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("building %s in %s: %v\n%s", b.pkg, root, err, out)
		}
	}
	return orchestra, fixture, nil
}

func connect(ctx context.Context, cmd *exec.Cmd, changed chan<- struct{}) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, opts)
	return c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
}

// waitForTool waits until the server lists name: downstream servers start
// in the background.
func waitForTool(ctx context.Context, cs *mcp.ClientSession, changed <-chan struct{}, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == name }) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("the server never listed %s: %w", name, ctx.Err())
		}
	}
}

func call(ctx context.Context, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", name, err)
	}
	if res.IsError {
		text := ""
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				text = t.Text
			}
		}
		return nil, fmt.Errorf("calling %s: tool error: %.300s", name, text)
	}
	return res, nil
}

// endToEnd compares a 12-step plan sent to orchestra over MCP stdio with
// the same 12 calls made by the client straight to the downstream server.
func endToEnd(ctx context.Context, c *options, r *report) error {
	const steps = 12
	const sleepMS = 20
	reps := 200
	if c.quick {
		reps = 10
	}
	dir, err := os.MkdirTemp("", "orchestra-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	orchestraBin, fixtureBin, err := buildBinaries(ctx, dir)
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"limits":     map[string]any{"max_parallel": steps, "max_steps": steps},
		"mcpServers": map[string]any{"fx": map[string]any{"command": fixtureBin}},
	}
	data, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "orchestra.json")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return err
	}

	direct, err := connect(ctx, exec.Command(fixtureBin), nil)
	if err != nil {
		return fmt.Errorf("starting the fixture server: %w", err)
	}
	defer direct.Close()
	changed := make(chan struct{}, 1)
	orch, err := connect(ctx, exec.Command(orchestraBin, "serve", "--config", cfgPath), changed)
	if err != nil {
		return fmt.Errorf("starting orchestra: %w", err)
	}
	defer orch.Close()
	if err := waitForTool(ctx, orch, changed, "fx__echo"); err != nil {
		return err
	}

	// The plans: a chain of echoes, each passing the previous text on; and
	// independent sleeps, in sequence and under the dag schedule.
	chain := make([]map[string]any, steps)
	sleeps := make([]map[string]any, steps)
	for i := range steps {
		text := "hello"
		if i > 0 {
			text = fmt.Sprintf("$e%d.output.text", i-1)
		}
		chain[i] = map[string]any{"id": fmt.Sprintf("e%d", i), "tool": "fx__echo", "arguments": map[string]any{"text": text}}
		sleeps[i] = map[string]any{"id": fmt.Sprintf("z%d", i), "tool": "fx__sleep", "arguments": map[string]any{"ms": sleepMS}}
	}
	chainPlan := map[string]any{"plan": map[string]any{"steps": chain}}
	sleepPlan := map[string]any{"plan": map[string]any{"schedule": "dag", "steps": sleeps}}

	type variant struct {
		name string
		run  func() error
	}
	variants := []variant{
		{"direct: 12 echo calls", func() error {
			text := "hello"
			for range steps {
				res, err := call(ctx, direct, "echo", map[string]any{"text": text})
				if err != nil {
					return err
				}
				text = res.StructuredContent.(map[string]any)["text"].(string)
			}
			return nil
		}},
		{"orchestra: 12-step echo plan", func() error {
			_, err := call(ctx, orch, "agent_orchestrate", chainPlan)
			return err
		}},
		{"orchestra: 12 proxied echo calls", func() error {
			for range steps {
				if _, err := call(ctx, orch, "fx__echo", map[string]any{"text": "hello"}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"direct: 12 sleep(20ms) calls", func() error {
			for range steps {
				if _, err := call(ctx, direct, "sleep", map[string]any{"ms": sleepMS}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"orchestra: 12 sleep(20ms) steps, dag", func() error {
			_, err := call(ctx, orch, "agent_orchestrate", sleepPlan)
			return err
		}},
	}
	results := map[string]stats{}
	var rows [][]string
	for _, v := range variants {
		n := reps
		if strings.Contains(v.name, "sleep") {
			n = max(3, reps/10)
		}
		if err := v.run(); err != nil { // warm up
			return fmt.Errorf("%s: %w", v.name, err)
		}
		var walls []time.Duration
		for range n {
			start := time.Now()
			if err := v.run(); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			walls = append(walls, time.Since(start))
		}
		s := summarize(walls)
		results[v.name] = s
		rows = append(rows, []string{v.name, itoa(n), ms(s.p50), ms(s.mean), ms(s.p99), ms(s.p50 / steps)})
	}
	if err := r.table("e2e", []string{"variant", "runs", "p50_ms", "mean_ms", "p99_ms", "p50_ms/step"}, rows); err != nil {
		return err
	}
	added := (results["orchestra: 12-step echo plan"].p50 - results["direct: 12 echo calls"].p50) / steps
	speedup := float64(results["direct: 12 sleep(20ms) calls"].p50) / float64(results["orchestra: 12 sleep(20ms) steps, dag"].p50)
	fmt.Fprintf(r.w, "orchestra adds %s ms per step against direct calls (goal ≤ 0.5 ms); independent steps in parallel: %.1fx faster than the direct sequential calls\n", ms(added), speedup)
	var bars plotter.XYs
	var names []string
	for i, v := range variants {
		bars = append(bars, plotter.XY{X: float64(i), Y: msf(results[v.name].p50)})
		names = append(names, strings.NewReplacer("orchestra: ", "orch.\n", "direct: ", "direct\n", " calls", "", " steps", "", " plan", "").Replace(v.name))
	}
	return r.barPlot("e2e", "End to end over MCP stdio (median of the runs)", "ms", names, series{"p50", bars})
}
