package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gonum.org/v1/plot/plotter"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
)

// echoTool returns its text.
func echoTool() registry.Tool {
	return registry.Tool{
		Name: "echo", Description: "Returns its text.", Source: "bench",
		InputSchema:  mustSchema(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		OutputSchema: mustSchema(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			return &registry.Result{Structured: map[string]any{"text": req.Arguments["text"]}}, nil
		},
	}
}

// httpThroughput runs K clients over Streamable HTTP against one
// in-process server on a loopback listener: a trivial plan (one echo step)
// against the bare echo tool.
func httpThroughput(ctx context.Context, c *options, r *report) error {
	cfg := config.Default()
	cfg.Limits.MaxConcurrentPlans = 1024
	cfg.Server.RateLimit.RequestsPerSecond = -1 // measure the server, not the limiter
	app, err := server.New(ctx, cfg, server.Options{Tools: []registry.Tool{echoTool()}})
	if err != nil {
		return err
	}
	defer app.Close()
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	defer srv.Close()
	clients := []int{1, c.clients}
	if c.clients == 1 {
		clients = clients[:1]
	}
	plan := map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "echo", "arguments": map[string]any{"text": "hi"}}}}}
	var rows [][]string
	var bareXY, planXY plotter.XYs
	for _, k := range clients {
		sessions := make([]*mcp.ClientSession, k)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * k}}
		for i := range sessions {
			cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc}, nil)
			if err != nil {
				return fmt.Errorf("connecting: %w", err)
			}
			defer cs.Close()
			sessions[i] = cs
		}
		rps := map[string]float64{}
		for _, v := range []struct {
			name string
			tool string
			args any
		}{{"bare echo tool", "echo", map[string]any{"text": "hi"}}, {"1-step plan", "agent_orchestrate", plan}} {
			var mu sync.Mutex
			var lat []time.Duration
			var firstErr error
			var wg sync.WaitGroup
			start := time.Now()
			deadline := start.Add(c.duration)
			for _, cs := range sessions {
				wg.Go(func() {
					var mine []time.Duration
					for time.Now().Before(deadline) {
						t0 := time.Now()
						if _, err := call(ctx, cs, v.tool, v.args); err != nil {
							mu.Lock()
							firstErr = err
							mu.Unlock()
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			if firstErr != nil {
				return fmt.Errorf("%s with %d clients: %w", v.name, k, firstErr)
			}
			s := summarize(lat)
			rps[v.name] = float64(len(lat)) / elapsed.Seconds()
			rows = append(rows, []string{itoa(k), v.name, itoa(len(lat)), fmt.Sprintf("%.0f", rps[v.name]), ms(s.p50), ms(s.p99), f2(rps[v.name] / rps["bare echo tool"])})
		}
		bareXY = append(bareXY, plotter.XY{X: float64(k), Y: rps["bare echo tool"]})
		planXY = append(planXY, plotter.XY{X: float64(k), Y: rps["1-step plan"]})
	}
	if err := r.table("http", []string{"clients", "call", "requests", "req/s", "p50_ms", "p99_ms", "vs_bare"}, rows); err != nil {
		return err
	}
	return r.linePlot("http", "Streamable HTTP throughput (loopback, in-process server)", "concurrent clients", "requests per second", true,
		series{"bare echo tool", bareXY}, series{"1-step plan", planXY})
}
