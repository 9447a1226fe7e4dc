package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/itchyny/gojq"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/registry"
)

// jqInput documents the arguments of json_query.
type jqInput struct {
	Query string         `json:"query" jsonschema:"The jq program, e.g. [.items[] | select(.stars > 100) | .name]. The input value is '.', each var is $name."`
	Input any            `json:"input,omitempty" jsonschema:"The JSON value the program runs on (any type; usually a template such as $0.output). Default null."`
	Vars  map[string]any `json:"vars,omitempty" jsonschema:"Named JSON values the program reads as $name, e.g. {\"min\": 3} for $min."`
}

// jqOutput documents the structured output of json_query.
type jqOutput struct {
	Result  any   `json:"result" jsonschema:"The program's only result when it emits exactly one value; null when it emits none; the array of all results when it emits several."`
	Results []any `json:"results" jsonschema:"Every value the program emitted, in order."`
	Count   int   `json:"count" jsonschema:"How many values the program emitted."`
}

const jqDescription = `Run a jq program over a JSON value and return what it emits.

Use it to reshape one step's output into the next step's arguments without a model round trip: pick fields, filter and sort arrays, count, join strings, build new objects.

Arguments: "query" is the jq program (jq 1.7 syntax, implemented by gojq), "input" is the value it runs on ('.'; usually a template such as "$search.output"), "vars" are extra values read as $name.

Output: "results" lists every emitted value; "result" is the single value when exactly one was emitted (null for none, all of them as an array for several), so a later step can use "$<step>.output.result" directly. Wrap a program in [...] to always get one array.

Examples: ".items | length"; "[.items[] | {name, url: .html_url}]"; ".users | map(select(.age >= $min)) | sort_by(.name)" with vars {"min": 18}; "[.[] | .title] | join(\", \")".

Limits: no input/inputs, no $ENV/env, no modules. A program that runs too long, emits too many values or too much JSON stops with an error; use first(...), limit(n; ...) or .[:n] to bound it. A jq runtime error (e.g. "cannot iterate over null") is reported with the failing value.`

var jqVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// JSONQuery returns the json_query tool, which runs a jq program over a JSON
// value under cfg's time, memory and size limits, evaluating in
// opts.Workers.
func JSONQuery(cfg JQConfig, opts Options) registry.Tool {
	cfg = cfg.withDefaults()
	return jsonQueryTool(cfg, newEvaluator(cfg.MaxMemoryBytes, DefaultWorkers, opts.workers()))
}

func jsonQueryTool(cfg JQConfig, ev *evaluator) registry.Tool {
	in := schemaFor[jqInput]()
	out := schemaFor[jqOutput]()
	out.Properties["results"].Types = nil
	out.Properties["results"].Type = "array"
	in.Properties["query"].MinLength = new(1)
	return registry.Tool{
		Name:         "json_query",
		Title:        "JSON query (jq)",
		Description:  jqDescription,
		InputSchema:  in,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:          "JSON query (jq)",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  new(false),
		},
		Source: Source,
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			res, err := runJSONQuery(ctx, cfg, ev, req.Arguments)
			if r, ok := toolError(err); ok {
				return r, nil
			}
			return res, err
		},
	}
}

// jqJob is what json_query sends to its evaluator, which answers with the
// JSON array of the program's results.
type jqJob struct {
	Args           map[string]any `json:"args"`
	MaxOutputBytes int            `json:"max_output_bytes"`
	MaxResults     int            `json:"max_results"`
}

func runJSONQuery(ctx context.Context, cfg JQConfig, ev *evaluator, args map[string]any) (*registry.Result, error) {
	payload, err := json.Marshal(jqJob{Args: args, MaxOutputBytes: cfg.MaxOutputBytes, MaxResults: cfg.MaxResults})
	if err != nil {
		return nil, argErrorf("json_query: the arguments are not JSON: %v", err)
	}
	// The results' size is checked in the evaluator; a reply several
	// times larger is an evaluator that went wrong.
	reply, err := ev.run(ctx, "json_query", cfg.Timeout.D(), payload, 8*cfg.MaxOutputBytes+maxEvalError)
	if err != nil {
		return nil, evalFailure(ctx, "json_query", err,
			"the program needed more than %s of memory (json_query.max_memory_bytes in the config file); "+
				"it builds values that are too large: bound them with limit(n; ...), .[:n] or first(...)",
			"the program did not finish within %s of CPU time (json_query.timeout in the config file); "+
				"it probably never ends: check repeat, recurse, while, until and range bounds, and bound the output with first(...) or limit(n; ...)")
	}
	var decoded any
	if err := decodeJSON(reply, &decoded); err != nil {
		return nil, fmt.Errorf("json_query: the evaluator's reply does not decode: %w", err)
	}
	results, err := normalizeJSON(decoded)
	if err != nil {
		return nil, fmt.Errorf("json_query: the evaluator's reply: %w", err)
	}
	list, _ := results.([]any)
	if list == nil {
		list = []any{}
	}
	var result any
	switch len(list) {
	case 0:
	case 1:
		result = list[0]
	default:
		result = list
	}
	return jsonResult(map[string]any{
		"result":  result,
		"results": list,
		"count":   len(list),
	}), nil
}

// evalJSONQuery is json_query's evaluation: a jqJob in, the JSON array of
// the program's results out.
func evalJSONQuery(ctx context.Context, payload []byte) ([]byte, error) {
	var job jqJob
	if err := decodeJSON(payload, &job); err != nil {
		return nil, fmt.Errorf("json_query: decoding the job: %w", err)
	}
	results, err := queryJSON(ctx, job)
	if err != nil {
		return nil, err
	}
	return json.Marshal(results)
}

// queryJSON checks the arguments of job, compiles its program and runs it.
func queryJSON(ctx context.Context, job jqJob) ([]any, error) {
	const tool = "json_query"
	args := job.Args
	if err := checkKeys(tool, args, "query", "input", "vars"); err != nil {
		return nil, err
	}
	src, _, err := stringArg(tool, args, "query")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(src) == "" {
		return nil, argErrorf(`json_query: argument "query" is required: give a jq program such as ".items | length"`)
	}
	input, err := normalizeJSON(args["input"])
	if err != nil {
		return nil, argErrorf("json_query: argument \"input\": %v", err)
	}
	vars, err := objectArg(tool, args, "vars")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	varNames := make([]string, len(names))
	values := make([]any, len(names))
	for i, name := range names {
		bare := strings.TrimPrefix(name, "$")
		if !jqVarName.MatchString(bare) || bare == "ENV" || bare == "__loc__" {
			return nil, argErrorf("json_query: variable name %q is not usable: names match [A-Za-z_][A-Za-z0-9_]* and are read as $name ($ENV and $__loc__ are reserved)", name)
		}
		if slices.Contains(varNames[:i], "$"+bare) {
			return nil, argErrorf("json_query: variable $%s is given twice in vars (as %q and %q); keep one", bare, bare, "$"+bare)
		}
		v, err := normalizeJSON(vars[name])
		if err != nil {
			return nil, argErrorf("json_query: variable %q: %v", name, err)
		}
		values[i] = v
		varNames[i] = "$" + bare
	}
	code, err := compileJQ(src, varNames)
	if err != nil {
		return nil, err
	}
	return execJQ(ctx, code, input, values, job)
}

func compileJQ(src string, varNames []string) (*gojq.Code, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, argErrorf("json_query: the program does not parse: %v %s; fix the jq syntax (strings use double quotes, pipes are |, objects are {key: value})",
				err, jqLocation(src, pe.Offset))
		}
		return nil, argErrorf("json_query: the program does not parse: %v", err)
	}
	code, err := gojq.Compile(q,
		gojq.WithVariables(varNames),
		gojq.WithEnvironLoader(func() []string { return nil }),
	)
	if err != nil {
		msg := err.Error()
		hint := "fix the program"
		switch {
		case strings.Contains(msg, "input(s)"):
			hint = "input and inputs are disabled: the program's input is the \"input\" argument, read it as '.'"
		case strings.Contains(msg, "variable not defined"):
			hint = "pass the value in \"vars\" (e.g. {\"name\": ...} for $name)"
			if len(varNames) > 0 {
				hint += "; defined: " + strings.Join(varNames, ", ")
			}
		case strings.Contains(msg, "function not defined"):
			hint = "use a jq builtin or define the function with def name: body;"
		case strings.Contains(msg, "module"), strings.Contains(msg, "import"), strings.Contains(msg, "include"):
			hint = "modules are not available: define the functions in the program"
		}
		return nil, argErrorf("json_query: the program does not compile: %s; %s", msg, hint)
	}
	return code, nil
}

// jqLocation says where offset is in src: "at line 1, column 7 near ...".
func jqLocation(src string, offset int) string {
	offset = max(0, min(offset, len(src)))
	line := 1 + strings.Count(src[:offset], "\n")
	col := 1 + utf8.RuneCountInString(src[strings.LastIndexByte(src[:offset], '\n')+1:offset])
	start := textcut.Index(src, max(0, offset-20))
	near := strings.TrimSpace(src[start:offset])
	if near == "" {
		return fmt.Sprintf("at line %d, column %d", line, col)
	}
	return fmt.Sprintf("at line %d, column %d, after %q", line, col, near)
}

// execJQ runs code, stopping at job's result and size caps.
func execJQ(ctx context.Context, code *gojq.Code, input any, values []any, job jqJob) ([]any, error) {
	results := []any{}
	budget := job.MaxOutputBytes
	iter := code.RunWithContext(ctx, input, values...)
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.ExitCode() == 0 && halt.Value() == nil {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return nil, err
			}
			if errors.As(err, &halt) {
				return nil, argErrorf("json_query: the program stopped with halt_error: %s", jqValueString(halt.Value()))
			}
			return nil, argErrorf("json_query: the program failed after %d result(s): %v", len(results), err)
		}
		if len(results) == job.MaxResults {
			return nil, argErrorf("json_query: the program emitted more than %d values (json_query.max_results in the config file); "+
				"bound it with first(...), limit(n; ...) or [...] | .[:n], or aggregate with length, add or group_by", job.MaxResults)
		}
		n := jsonSize(v, budget)
		if n > budget {
			return nil, argErrorf("json_query: the results exceed %s of JSON (json_query.max_output_bytes in the config file); "+
				"select fewer fields or fewer values (e.g. map({id, name}) or .[:10])", formatBytes(int64(job.MaxOutputBytes)))
		}
		budget -= n
		results = append(results, sanitizeJQ(v))
	}
	return results, nil
}

func jqValueString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := gojq.Marshal(v)
	return string(b)
}

// sanitizeJQ converts a gojq value into one encoding/json can marshal and
// the plan engine can walk: NaN becomes null, infinities are clamped, big
// integers become json.Number.
func sanitizeJQ(v any) any {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) {
			return nil
		}
		return min(max(v, -math.MaxFloat64), math.MaxFloat64)
	case *big.Int:
		if v.IsInt64() && v.Int64() >= math.MinInt && v.Int64() <= math.MaxInt {
			return int(v.Int64())
		}
		return json.Number(v.String())
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = sanitizeJQ(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = sanitizeJQ(e)
		}
		return out
	}
	return v
}

// jsonSize returns the approximate size of v encoded as JSON, stopping as
// soon as it exceeds limit (it then returns a value above limit).
func jsonSize(v any, limit int) int {
	switch v := v.(type) {
	case nil:
		return 4
	case bool:
		if v {
			return 4
		}
		return 5
	case int:
		return len(strconv.Itoa(v))
	case float64:
		return len(strconv.FormatFloat(v, 'g', -1, 64))
	case *big.Int:
		return len(v.String())
	case json.Number:
		return len(v)
	case string:
		return stringSize(v)
	case []any:
		n := 2
		for _, e := range v {
			n += jsonSize(e, limit-n) + 1
			if n > limit {
				return n
			}
		}
		return n
	case map[string]any:
		n := 2
		for k, e := range v {
			n += stringSize(k) + 2 + jsonSize(e, limit-n)
			if n > limit {
				return n
			}
		}
		return n
	}
	return 8
}

func stringSize(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			n++
		}
	}
	return n
}
