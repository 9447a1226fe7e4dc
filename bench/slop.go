package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// slopSteps is the length of the job measured against slop-mcp.
const slopSteps = 12

// slopPeer measures the same job three ways, interleaved round by round so
// that the machine's load falls on all alike: slopSteps sequential echo
// calls to server-everything made directly by the client, the same calls
// as one run_slop script of slop-mcp (a Go MCP orchestrator, installed
// from npm in bench/slop), and as one orchestra plan (compact, with a
// return value, and full). It reports the median wall time of each and
// the bytes of each response.
func slopPeer(ctx context.Context, c *options, r *report) error {
	root, err := orchestraDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "bench", "slop")
	slopBin := filepath.Join(dir, "node_modules", "@standardbeagle", "slop-mcp", "binaries", fmt.Sprintf("slop-mcp-%s-%s", runtime.GOOS, runtime.GOARCH))
	everything := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(slopBin); err != nil || nodeErr != nil {
		fmt.Fprintf(r.w, "skipped: slop-mcp is not installed (run `npm ci` in bench/slop, with node on PATH)\n")
		return nil
	}
	if _, err := os.Stat(everything); err != nil {
		fmt.Fprintf(r.w, "skipped: server-everything is not installed (run `npm ci` in bench/slop)\n")
		return nil
	}
	tmp, err := os.MkdirTemp("", "orchestra-bench-slop-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// slop-mcp reads its servers from .slop-mcp.kdl in its working directory.
	kdl := fmt.Sprintf("mcp \"ev\" {\n  command %q\n  args %q\n}\n", node, everything)
	if err := os.WriteFile(filepath.Join(tmp, ".slop-mcp.kdl"), []byte(kdl), 0o644); err != nil {
		return err
	}
	slopCmd := exec.CommandContext(ctx, slopBin, "serve")
	slopCmd.Dir = tmp
	slopCmd.Env = append(os.Environ(), "HOME="+tmp)
	slop, err := connect(ctx, slopCmd, nil)
	if err != nil {
		return fmt.Errorf("starting slop-mcp: %w", err)
	}
	defer slop.Close()

	orchestraBin, _, err := buildBinaries(ctx, tmp)
	if err != nil {
		return err
	}
	cfg := filepath.Join(tmp, "orchestra.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "mcpServers:\n  ev:\n    command: %q\n    args: [%q]\n", node, everything), 0o644); err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	orch, err := connect(ctx, exec.CommandContext(ctx, orchestraBin, "serve", "--config", cfg, "--store", "memory"), changed)
	if err != nil {
		return fmt.Errorf("starting orchestra: %w", err)
	}
	defer orch.Close()
	if err := waitForTool(ctx, orch, changed, "ev__echo"); err != nil {
		return err
	}
	direct, err := connect(ctx, exec.CommandContext(ctx, node, everything), nil)
	if err != nil {
		return fmt.Errorf("starting server-everything: %w", err)
	}
	defer direct.Close()

	var script strings.Builder
	steps := make([]any, slopSteps)
	for i := range slopSteps {
		fmt.Fprintf(&script, "a%d = ev.echo(message: \"step %d\")\n", i, i)
		steps[i] = map[string]any{"id": fmt.Sprintf("a%d", i), "tool": "ev__echo", "arguments": map[string]any{"message": fmt.Sprintf("step %d", i)}}
	}
	fmt.Fprintf(&script, "emit(last: a%d)\n", slopSteps-1)
	plan := func(response string, ret bool) map[string]any {
		p := map[string]any{"steps": steps}
		if ret {
			p["return"] = fmt.Sprintf("$a%d.output", slopSteps-1)
		}
		return map[string]any{"plan": p, "response": response}
	}
	type way struct {
		name string
		run  func() (sizes, error)
	}
	// size returns the bytes of a result as JSON, and its payload: the
	// same without the _meta (serverInfo) and resultType that the SDK
	// adds to every result on protocol 2026-07-28 (SEP-2575), which the
	// server does not choose.
	size := func(res *mcp.CallToolResult) (all, payload int) {
		data, _ := json.Marshal(res)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(data, &m)
		delete(m, "_meta")
		delete(m, "resultType")
		rest, _ := json.Marshal(m)
		return len(data), len(rest)
	}
	call := func(cs *mcp.ClientSession, name string, args any) (sizes, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return sizes{}, err
		}
		if res.IsError {
			data, _ := json.Marshal(res.Content)
			return sizes{}, fmt.Errorf("%s failed: %s", name, data)
		}
		all, payload := size(res)
		return sizes{all, payload}, nil
	}
	ways := []way{
		{"direct calls", func() (sizes, error) {
			var n sizes
			for i := range slopSteps {
				b, err := call(direct, "echo", map[string]any{"message": fmt.Sprintf("step %d", i)})
				if err != nil {
					return sizes{}, err
				}
				n.all += b.all
				n.payload += b.payload
			}
			return n, nil
		}},
		{"slop-mcp run_slop", func() (sizes, error) { return call(slop, "run_slop", map[string]any{"script": script.String()}) }},
		{"orchestra, compact + return", func() (sizes, error) { return call(orch, "agent_orchestrate", plan("compact", true)) }},
		{"orchestra, compact", func() (sizes, error) { return call(orch, "agent_orchestrate", plan("compact", false)) }},
		{"orchestra, full", func() (sizes, error) { return call(orch, "agent_orchestrate", plan("full", false)) }},
	}
	rounds := 40
	if c.quick {
		rounds = 5
	}
	walls := make([][]float64, len(ways))
	bytes := make([]sizes, len(ways))
	for round := -2; round < rounds; round++ { // two rounds to warm up
		for k, w := range ways {
			start := time.Now()
			n, err := w.run()
			if err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			if round >= 0 {
				walls[k] = append(walls[k], msf(time.Since(start)))
				bytes[k] = n
			}
		}
	}
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	slopMedian := median(walls[1])
	var rows [][]string
	for k, w := range ways {
		m := median(walls[k])
		b := bytes[k]
		rows = append(rows, []string{w.name, f2(m), f2(slices.Min(walls[k])), f2(slices.Max(walls[k])), f2(m / slopMedian),
			itoa(b.all), f2(float64(b.all) / float64(bytes[1].all)), itoa(b.payload), f2(float64(b.payload) / float64(bytes[1].payload))})
	}
	fmt.Fprintf(r.w, "%d sequential echo calls to server-everything, %d interleaved rounds, the Go SDK client over stdio; bytes = the tools/call result as JSON; payload = the same without the SDK's _meta and resultType\n", slopSteps, rounds)
	return r.table("slop", []string{"way", "median_ms", "min_ms", "max_ms", "vs_slop", "response_bytes", "bytes_vs_slop", "payload_bytes", "payload_vs_slop"}, rows)
}

// sizes are the bytes of a tools/call result as JSON, whole and without
// the protocol's _meta and resultType.
type sizes struct{ all, payload int }
