package builtin

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
)

func TestJSONQuery(t *testing.T) {
	tool := JSONQuery(JQConfig{}, testOpts)
	tests := []struct {
		name string
		args string
		want string // the structured output as JSON
	}{
		{"one result", `{"query": ".a", "input": {"a": 1}}`, `{"result": 1, "results": [1], "count": 1}`},
		{"no results", `{"query": "empty", "input": null}`, `{"result": null, "results": [], "count": 0}`},
		{"several results", `{"query": ".[] | .n", "input": [{"n": 1}, {"n": 2}]}`, `{"result": [1, 2], "results": [1, 2], "count": 2}`},
		{"array is one result", `{"query": "[.[] | .n]", "input": [{"n": 1}, {"n": 2}]}`, `{"result": [1, 2], "results": [[1, 2]], "count": 1}`},
		{"input defaults to null", `{"query": ". == null"}`, `{"result": true, "results": [true], "count": 1}`},
		{"vars", `{"query": "map(select(.age >= $min)) | map(.name)", "input": [{"name": "a", "age": 20}, {"name": "b", "age": 10}], "vars": {"min": 18}}`,
			`{"result": ["a"], "results": [["a"]], "count": 1}`},
		{"vars with dollar", `{"query": "$x + 1", "vars": {"$x": 1}}`, `{"result": 2, "results": [2], "count": 1}`},
		{"reshape", `{"query": "{names: [.items[].name], total: (.items | length)}", "input": {"items": [{"name": "x"}, {"name": "y"}]}}`,
			`{"result": {"names": ["x", "y"], "total": 2}, "results": [{"names": ["x", "y"], "total": 2}], "count": 1}`},
		{"env is empty", `{"query": "[$ENV, env]"}`, `{"result": [{}, {}], "results": [[{}, {}]], "count": 1}`},
		{"nan is null", `{"query": "nan"}`, `{"result": null, "results": [null], "count": 1}`},
		{"big integer", `{"query": "100000000000000000000 * 3"}`, `{"result": 300000000000000000000, "results": [300000000000000000000], "count": 1}`},
		{"halt stops", `{"query": "1, halt, 2"}`, `{"result": 1, "results": [1], "count": 1}`},
	}
	for _, tt := range tests {
		for _, useNumber := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				res, err := tool.Invoke(t.Context(), &registry.CallRequest{Arguments: decodeArgs(t, tt.args, useNumber)})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError {
					t.Fatalf("tool error: %s", res.Text())
				}
				want := decodeArgs(t, tt.want, false)
				if diff := cmp.Diff(roundTrip(t, want), roundTrip(t, res.Output())); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(roundTrip(t, want), roundTrip(t, decodeArgs(t, res.Text(), false))); diff != "" {
					t.Errorf("text content (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestJSONQueryJSONNumberInput checks that numbers decoded as json.Number
// work, and that integers beyond float64 precision survive.
func TestJSONQueryJSONNumberInput(t *testing.T) {
	res, err := JSONQuery(JQConfig{}, testOpts).Invoke(t.Context(), &registry.CallRequest{Arguments: decodeArgs(t,
		`{"query": "[.a * 2, .b]", "input": {"a": 1.5, "b": 12345678901234567890}}`, true)})
	if err != nil || res.IsError {
		t.Fatalf("got %v, %v", res.Text(), err)
	}
	if got, want := res.Text(), `"result":[3,12345678901234567890]`; !strings.Contains(got, want) {
		t.Errorf("text %s does not contain %s", got, want)
	}
}

func TestJSONQueryErrors(t *testing.T) {
	tool := JSONQuery(JQConfig{}, testOpts)
	tests := []struct {
		name      string
		args      string
		fragments []string
	}{
		{"missing query", `{"input": 1}`, []string{`"query" is required`}},
		{"query not a string", `{"query": 3}`, []string{`"query" must be a string`}},
		{"unknown argument", `{"query": ".", "filter": "."}`, []string{`unknown argument "filter"`, "query, input, vars"}},
		{"vars not an object", `{"query": ".", "vars": [1]}`, []string{`"vars" must be an object`}},
		{"bad var name", `{"query": ".", "vars": {"a-b": 1}}`, []string{`variable name "a-b"`}},
		{"reserved var name", `{"query": ".", "vars": {"ENV": 1}}`, []string{`variable name "ENV"`, "reserved"}},
		{"duplicate var", `{"query": "$x", "vars": {"x": 1, "$x": 2}}`, []string{"$x is given twice"}},
		{"syntax error", `{"query": ".a | | .b"}`, []string{"does not parse", "line 1, column", "fix the jq syntax"}},
		{"unterminated", `{"query": "[.a"}`, []string{"does not parse", "unexpected EOF"}},
		{"unknown function", `{"query": "frobnicate(.)"}`, []string{"does not compile", "frobnicate", "def name"}},
		{"undefined variable", `{"query": "$nope", "vars": {"yes": 1}}`, []string{"does not compile", "$nope", "vars", "$yes"}},
		{"input disabled", `{"query": "input"}`, []string{"does not compile", "input and inputs are disabled"}},
		{"inputs disabled", `{"query": "[inputs]"}`, []string{"does not compile", "input and inputs are disabled"}},
		{"modules disabled", `{"query": "import \"a\" as a; ."}`, []string{"does not compile"}},
		{"runtime error", `{"query": ".[] | .x", "input": [1]}`, []string{"program failed", "expected an object"}},
		{"halt_error", `{"query": "\"bad input\" | halt_error"}`, []string{"halt_error: bad input"}},
		{"error", `{"query": "error(\"custom\")"}`, []string{"program failed", "custom"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, tool, tt.args)
			wantToolError(t, res, err, tt.fragments...)
		})
	}
}

// TestJSONQueryRunaway checks that programs that never end, emit without end
// or build huge values stop with a clear error instead of hanging.
func TestJSONQueryRunaway(t *testing.T) {
	tool := JSONQuery(JQConfig{Timeout: Duration(200 * time.Millisecond), MaxOutputBytes: 16 << 10, MaxResults: 1000}, testOpts)
	tests := []struct {
		name      string
		query     string
		fragments []string
	}{
		{"repeat", `repeat(.)`, []string{"more than 1000 values", "json_query.max_results", "limit(n; ...)"}},
		{"range", `range(1e9)`, []string{"more than 1000 values", "json_query.max_results"}},
		{"collect range", `[range(1e7)]`, []string{"json_query."}},
		{"collect range 1e4", `[range(1e4)]`, []string{"exceed 16 KiB", "json_query.max_output_bytes"}},
		{"collect repeat", `[limit(1e9; repeat(1))] | length`, []string{"did not finish within 200ms", "json_query.timeout"}},
		{"infinite loop", `def f: f; f`, []string{"did not finish within 200ms", "json_query.timeout"}},
		{"last of range", `last(range(1e10))`, []string{"did not finish within 200ms"}},
		{"big string", `[range(100)] | map("x" * 1000)`, []string{"exceed 16 KiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, tool, `{"query": `+quote(tt.query)+`, "input": 1}`)
			wantToolError(t, res, err, tt.fragments...)
		})
	}
}

func TestJSONQueryCancelled(t *testing.T) {
	ctx, cancel := contextWithCancel(t)
	cancel()
	_, err := JSONQuery(JQConfig{}, testOpts).Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"query": "repeat(.)"}})
	if err == nil {
		t.Fatal("got no error from a cancelled call")
	}
	if registry.IsTransient(err) {
		t.Errorf("cancellation %v is reported as transient", err)
	}
}
