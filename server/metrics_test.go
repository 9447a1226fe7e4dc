package server_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestMetricLabelsAreBounded replays a break: a step's metrics were
// labelled with its tool's name whatever it was, so a caller naming fresh
// tools (client tools, unknown ones) made a series each: 29,000 series,
// 7 MB of /metrics. Only the catalog's names label metrics now; the rest
// are counted as "other".
func TestMetricLabelsAreBounded(t *testing.T) {
	app, err := server.New(t.Context(), config.Default(), server.Options{Version: "test", Metrics: true, Store: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	cs := connectInMemory(t, app, v20251125)
	for i := range 40 {
		fresh := fmt.Sprintf("fresh_tool_%d", i)
		servertest.Call(t, cs, map[string]any{
			"plan":         map[string]any{"steps": []any{map[string]any{"id": "c", "tool": fresh, "arguments": map[string]any{}}}},
			"client_tools": []any{map[string]any{"name": fresh}},
		}, nil)
		servertest.Call(t, cs, map[string]any{
			"plan": map[string]any{"steps": []any{
				map[string]any{"id": "ok", "tool": "json_query", "arguments": map[string]any{"query": ".", "input": 1}},
				map[string]any{"id": "x", "tool": "unknown_tool_" + fmt.Sprint(i), "arguments": map[string]any{}},
			}},
		}, nil)
		servertest.Call(t, cs, map[string]any{
			"plan":         map[string]any{"steps": []any{map[string]any{"id": "c", "tool": fresh, "arguments": map[string]any{}}}},
			"client_tools": []any{map[string]any{"name": fresh}},
			"dry_run":      true,
		}, nil)
	}
	servertest.Call(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "json_query", "arguments": map[string]any{"query": ".", "input": 1}}}}}, nil)
	w := httptest.NewRecorder()
	app.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	labels := map[string]bool{}
	for _, m := range regexp.MustCompile(`gen_ai_tool_name="([^"]*)"`).FindAllStringSubmatch(string(body), -1) {
		labels[m[1]] = true
	}
	for l := range labels {
		if _, inCatalog := app.Catalog.Lookup(l); !inCatalog && l != "other" {
			t.Errorf("a metric is labelled with the tool %q, which is not in the catalog", l)
		}
	}
	if !labels["json_query"] {
		t.Errorf("no metric of json_query's steps: %v", labels)
	}
	if strings.Count(string(body), "\n") > 2000 {
		t.Errorf("/metrics holds %d lines", strings.Count(string(body), "\n"))
	}
}
