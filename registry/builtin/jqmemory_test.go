package builtin

import (
	"runtime"
	"testing"
)

// TestJSONQueryMemoryLimit runs a program that doubles a string 40 times
// (a terabyte at the end) and checks it stops at the memory bound long
// before its timeout, with a message that says how to fix it.
func TestJSONQueryMemoryLimit(t *testing.T) {
	tool := JSONQuery(JQConfig{MaxMemoryBytes: 32 << 20, Timeout: Duration(60e9)})
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := call(t, tool, `{"query": "reduce range(40) as $i (\"a\"; . + .) | length", "input": null}`)
	wantToolError(t, res, err, "more than 32 MiB of memory", "json_query.max_memory_bytes", "limit(n; ...)")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 1<<30 {
		t.Errorf("the program allocated %d bytes before it was stopped; want well under 1 GiB", grown)
	}
}
