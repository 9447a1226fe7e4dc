package builtin

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/internal/worker"
	"github.com/orchestra-mcp/orchestra/registry"
)

// hostileDefines is a template of n defines, each calling the one before
// twice and the last writing nothing: 2^n calls that never reach
// the output cap, which render would spend hours on.
func hostileDefines(n int) string {
	var b strings.Builder
	b.WriteString(`{{define "t0"}}{{end}}`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{{define "t%d"}}{{template "t%d"}}{{template "t%d"}}{{end}}`, i, i-1, i-1)
	}
	fmt.Fprintf(&b, `{{template "t%d"}}`, n)
	return b.String()
}

// hostileDoubling is a template that doubles a variable n times.
func hostileDoubling(n int) string {
	return `{{$x := "ab"}}` + strings.Repeat(`{{$x = printf "%s%s" $x $x}}`, n) + `{{len $x}}`
}

// TestHostileEvaluations runs programs and templates that take all the
// memory or CPU they can, each of which used to crash the server or burn
// CPU long after its caller gave up. In a worker each stops at its limit,
// deterministically, and the server's own heap never holds their values.
func TestHostileEvaluations(t *testing.T) {
	if !worker.Supported {
		t.Skip("workers are not supported on this platform")
	}
	jq := JSONQuery(JQConfig{MaxMemoryBytes: 64 << 20, Timeout: Duration(time.Second)}, testOpts)
	render := Render(RenderConfig{MaxMemoryBytes: 64 << 20, Timeout: Duration(time.Second), MaxOutputBytes: 1 << 30}, testOpts)
	memory := []string{"needed more than 64 MiB of memory", "max_memory_bytes"}
	cpu := []string{"did not finish within 1s of CPU time", ".timeout"}
	tests := []struct {
		name      string
		tool      registry.Tool
		args      map[string]any
		fragments []string
	}{
		{"jq doubling", jq, map[string]any{"query": `reduce range(40) as $i ("a"; . + .) | length`}, append(memory, "limit(n; ...)")},
		{"jq one 2 GiB string", jq, map[string]any{"query": `"x" * 2147483646 | length`}, memory},
		{"jq sparse index", jq, map[string]any{"query": `.[536870911] = 1 | length`, "input": []any{}}, memory},
		{"jq tonumber of a huge string", jq, map[string]any{"query": `"9" * 3000000 | tonumber | . * . | tostring | length`}, cpu},
		{"jq big integer squaring", jq, map[string]any{"query": `reduce range(40) as $i (3; . * .) | tostring | length`}, cpu},
		{"render doubling", render, map[string]any{"template": hostileDoubling(40)}, memory},
		{"render nested defines", render, map[string]any{"template": hostileDefines(44)}, cpu},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res, err := tt.tool.Invoke(t.Context(), &registry.CallRequest{Arguments: tt.args})
			wantToolError(t, res, err, tt.fragments...)
			runtime.ReadMemStats(&after)
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
				t.Errorf("the server allocated %d MiB for it; the worker's memory is its own", grown>>20)
			}
		})
	}
	// The workers that died were replaced.
	res, err := call(t, jq, `{"query": ". + 1", "input": 1}`)
	if err != nil || res.IsError {
		t.Fatalf("json_query after the hostile programs: %v, %v", res.Text(), err)
	}
}

// TestInnocentNotBlamed runs a small program next to one that exhausts
// its memory: each has its own worker, so only the hostile one fails.
func TestInnocentNotBlamed(t *testing.T) {
	if !worker.Supported {
		t.Skip("workers are not supported on this platform")
	}
	jq := JSONQuery(JQConfig{MaxMemoryBytes: 64 << 20}, testOpts)
	hostile := make(chan *registry.Result, 1)
	go func() {
		res, _ := jq.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"query": `reduce range(40) as $i ("a"; . + .)`}})
		hostile <- res
	}()
	for i := range 20 {
		res, err := jq.Invoke(t.Context(), &registry.CallRequest{Arguments: map[string]any{"query": "[range(.)] | add", "input": i}})
		if err != nil || res.IsError {
			t.Fatalf("innocent program %d failed next to a hostile one: %v, %v", i, res.Text(), err)
		}
	}
	if res := <-hostile; res == nil || !res.IsError || !strings.Contains(res.Text(), "of memory") {
		t.Errorf("the hostile program did not stop at its memory limit: %v", res)
	}
}

// TestInProcessFallback exercises the evaluation used where workers are
// not supported: a wall-clock timeout and a heap watcher.
func TestInProcessFallback(t *testing.T) {
	cfg := JQConfig{MaxMemoryBytes: 32 << 20, Timeout: Duration(5 * time.Second)}.withDefaults()
	jq := jsonQueryTool(cfg, &evaluator{memory: cfg.MaxMemoryBytes})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := call(t, jq, `{"query": "reduce range(40) as $i (\"a\"; . + .) | length", "input": null}`)
	wantToolError(t, res, err, "more than 32 MiB of memory", "json_query.max_memory_bytes", "limit(n; ...)")
	runtime.ReadMemStats(&after)
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 1<<30 {
		t.Errorf("the program allocated %d bytes before it was stopped; want well under 1 GiB", grown)
	}

	cfg = JQConfig{Timeout: Duration(100 * time.Millisecond)}.withDefaults()
	jq = jsonQueryTool(cfg, &evaluator{memory: cfg.MaxMemoryBytes})
	res, err = call(t, jq, `{"query": "def f: f; f"}`)
	wantToolError(t, res, err, "did not finish within 100ms", "json_query.timeout")

	rcfg := RenderConfig{}.withDefaults()
	render := renderTool(rcfg, &evaluator{memory: rcfg.MaxMemoryBytes})
	res, err = call(t, render, `{"template": "{{.a}} and {{.b}}", "values": {"a": 1, "b": "two"}}`)
	if err != nil || res.IsError || res.Text() != "1 and two" {
		t.Fatalf("render in process = %q, %v", res.Text(), err)
	}
	res, err = call(t, jq, `{"query": "[.[] | . * 2]", "input": [1, 2.5]}`)
	if err != nil || res.IsError {
		t.Fatalf("json_query in process = %q, %v", res.Text(), err)
	}
	var out struct{ Result []float64 }
	if err := json.Unmarshal([]byte(res.Text()), &out); err != nil || len(out.Result) != 2 || out.Result[1] != 5 {
		t.Errorf("json_query in process = %s", res.Text())
	}
}
