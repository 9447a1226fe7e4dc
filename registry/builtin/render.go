package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/template/parse"

	template "github.com/DataDog/datadog-agent/pkg/template/text"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// renderInput documents the arguments of render.
type renderInput struct {
	Template string         `json:"template" jsonschema:"A Go text/template, e.g. Hello {{.name}}! You have {{len .items}} items."`
	Values   map[string]any `json:"values,omitempty" jsonschema:"The values the template reads as {{.key}}; usually templates such as $0.output. Default {}."`
}

// renderOutput documents the structured output of render.
type renderOutput struct {
	Text string `json:"text" jsonschema:"The rendered text."`
}

const renderDescription = `Render text from a template and values (Go text/template syntax).

Use it to build prompts, messages, reports, file contents or URLs from earlier steps' outputs, when "${step.output.field}" interpolation in a plan argument is not enough (loops, conditions, formatting).

Syntax: {{.key}} inserts values.key; {{.user.name}} goes deeper; {{index .list 0}} indexes; {{range .items}}...{{.}}...{{end}} loops ({{range $i, $x := .items}} names the index and element); {{if .flag}}...{{else}}...{{end}} branches; {{- and -}} trim the whitespace beside them; {{/* comment */}}.
Functions: json (compact JSON of a value), join SEP LIST, upper, lower, trim, default FALLBACK VALUE (FALLBACK when VALUE is empty: null, "", 0, false, empty list or object), indent N TEXT (prefix every line with N spaces), and the text/template builtins len, index, printf, print, eq, ne, lt, le, gt, ge, and, or, not. Functions chain with |: {{.title | upper}}.
A key missing from values is an error; for an optional key write {{index . "key" | default "none"}}.

Example: template "Report for {{.user}}:\n{{range .items}}- {{.name}} ({{.stars}} stars)\n{{end}}" with values {"user": "ana", "items": [{"name": "gojq", "stars": 3000}]} gives "Report for ana:\n- gojq (3000 stars)\n".

Output: {"text": "..."}. The text is capped in size; a template that produces more stops with an error.`

// Render returns the render tool, which renders a Go text/template with
// values, stopping at cfg's size, memory and time limits, evaluating in
// opts.Workers.
func Render(cfg RenderConfig, opts Options) registry.Tool {
	cfg = cfg.withDefaults()
	return renderTool(cfg, newEvaluator(cfg.MaxMemoryBytes, DefaultWorkers, opts.workers()))
}

func renderTool(cfg RenderConfig, ev *evaluator) registry.Tool {
	return registry.Tool{
		Name:         "render",
		Title:        "Render a text template",
		Description:  renderDescription,
		InputSchema:  schemaFor[renderInput](),
		OutputSchema: schemaFor[renderOutput](),
		Annotations: &mcp.ToolAnnotations{
			Title:          "Render a text template",
			ReadOnlyHint:   true,
			IdempotentHint: true,
			OpenWorldHint:  new(false),
		},
		Source: Source,
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			res, err := runRender(ctx, cfg, ev, req.Arguments)
			if r, ok := toolError(err); ok {
				return r, nil
			}
			return res, err
		},
	}
}

// Templates run on github.com/DataDog/datadog-agent/pkg/template/text: the
// code of text/template without its calls of methods on values, which the
// values here (JSON) never have. text/template finds methods with
// reflect.Value.MethodByName, and a reachable call of it makes the linker
// keep every exported method of every type in the binary: 7 MB of
// orchestra's release build.

// renderFuncs is the function map offered to templates.
var renderFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("json: %w", err)
		}
		return string(b), nil
	},
	"join": func(sep string, list any) (string, error) {
		switch l := list.(type) {
		case nil:
			return "", nil
		case []string:
			return strings.Join(l, sep), nil
		case []any:
			parts := make([]string, len(l))
			for i, e := range l {
				parts[i] = textOf(e)
			}
			return strings.Join(parts, sep), nil
		}
		return "", fmt.Errorf("join: the list must be an array, not %s (write join SEP LIST, e.g. join \", \" .names)", schemas.TypePhrase(list))
	},
	"upper": func(v any) string { return strings.ToUpper(textOf(v)) },
	"lower": func(v any) string { return strings.ToLower(textOf(v)) },
	"trim":  func(v any) string { return strings.TrimSpace(textOf(v)) },
	"default": func(fallback any, v ...any) any {
		if len(v) == 0 || isEmpty(v[len(v)-1]) {
			return fallback
		}
		return v[len(v)-1]
	},
	"indent": func(n any, v any) (string, error) {
		spaces, ok := toInt64(n)
		if !ok || spaces < 0 || spaces > 100 {
			return "", fmt.Errorf("indent: the width must be an integer from 0 to 100, not %v (write indent N TEXT)", n)
		}
		pad := strings.Repeat(" ", int(spaces))
		lines := strings.Split(textOf(v), "\n")
		for i, l := range lines {
			if l != "" {
				lines[i] = pad + l
			}
		}
		return strings.Join(lines, "\n"), nil
	},
}

var renderFuncNames = func() []string {
	names := make([]string, 0, len(renderFuncs))
	for n := range renderFuncs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}()

// textOf is how a value reads inside text: strings as they are, null as
// nothing, other values as compact JSON.
func textOf(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	case map[string]any, []any:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	return fmt.Sprint(v)
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case int:
		return v == 0
	case int64:
		return v == 0
	case float64:
		return v == 0
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// renderValue prepares values for text/template: whole numbers become ints
// so that they print as 3, not 3e+00, and compare with literals.
func renderValue(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) <= 1<<53 {
			return int(v)
		}
	case []any:
		for i, e := range v {
			v[i] = renderValue(e)
		}
	case map[string]any:
		for k, e := range v {
			v[k] = renderValue(e)
		}
	}
	return v
}

var (
	errRenderTooLarge = errors.New("output too large")
	errRenderLoops    = errors.New("too many loop iterations")
)

// maxRenderIterations bounds the iterations of all range loops of one
// render together: loops with empty bodies write nothing, so the output cap
// alone would not stop them.
const maxRenderIterations = 1_000_000

// rangeGuardFunc is the function guardRanges appends to range pipelines. It
// passes its argument through and counts it; a template that calls it by
// name only spends its own budget.
const rangeGuardFunc = "_orchestra_range_guard"

// walkTemplate calls visit for n and every action node under it.
func walkTemplate(n parse.Node, visit func(parse.Node)) {
	switch n := n.(type) {
	case nil:
		return
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkTemplate(c, visit)
		}
		return
	case *parse.IfNode:
		walkTemplate(n.List, visit)
		walkTemplate(n.ElseList, visit)
	case *parse.WithNode:
		walkTemplate(n.List, visit)
		walkTemplate(n.ElseList, visit)
	case *parse.RangeNode:
		walkTemplate(n.List, visit)
		walkTemplate(n.ElseList, visit)
	}
	visit(n)
}

// guardTemplates prepares the parsed templates of tmpl for execution:
// every range pipeline gets rangeGuardFunc appended, so that each loop's
// length is counted against the iteration budget before it runs; and
// templates that call themselves, directly or not, are refused, because
// recursion is the one construct whose depth the template text does not
// bound (text/template's own depth limit takes minutes to unwind from inside
// range loops).
func guardTemplates(tmpl *template.Template) error {
	calls := map[string][]string{}
	for _, t := range tmpl.Templates() {
		if t.Tree == nil {
			continue
		}
		tree := t.Tree
		walkTemplate(tree.Root, func(n parse.Node) {
			switch n := n.(type) {
			case *parse.RangeNode:
				id := parse.NewIdentifier(rangeGuardFunc).SetTree(tree).SetPos(n.Pos)
				n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{id}})
			case *parse.TemplateNode:
				calls[t.Name()] = append(calls[t.Name()], n.Name)
			}
		})
	}
	// Depth-first search for a cycle in the call graph.
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case active:
			i := slices.Index(path, name)
			return argErrorf("render: the template is recursive (%s): templates that call themselves are not supported; "+
				"flatten the data first (e.g. with a json_query step) and use range", strings.Join(append(slices.Clone(path[i:]), name), " -> "))
		case done:
			return nil
		}
		state[name] = active
		path = append(path, name)
		for _, callee := range calls[name] {
			if err := visit(callee); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return nil
	}
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := visit(name); err != nil {
			return err
		}
	}
	return nil
}

// rangeLen is how many iterations ranging over v takes.
func rangeLen(v any) int {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(max(0, min(rv.Int(), math.MaxInt32)))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(min(rv.Uint(), math.MaxInt32))
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		return rv.Len()
	}
	return 0
}

// boundedWriter collects at most max bytes and fails past them, or once ctx
// is done.
type boundedWriter struct {
	ctx context.Context
	b   strings.Builder
	max int
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	if w.b.Len()+len(p) > w.max {
		return 0, errRenderTooLarge
	}
	return w.b.Write(p)
}

var templateErrPrefix = regexp.MustCompile(`^template: render:(\d+)(?::(\d+))?: (?:executing "render" )?`)

// cleanTemplateError rewrites "template: render:3:7: executing "render" at
// <.x>: ..." as "line 3, column 7: at <.x>: ...".
func cleanTemplateError(err error) string {
	msg := err.Error()
	if m := templateErrPrefix.FindStringSubmatchIndex(msg); m != nil {
		loc := "line " + msg[m[2]:m[3]]
		if m[4] >= 0 {
			loc += ", column " + msg[m[4]:m[5]]
		}
		msg = loc + ": " + msg[m[1]:]
	}
	return msg
}

// renderJob is what render sends to its evaluator, which answers with the
// rendered text.
type renderJob struct {
	Args           map[string]any `json:"args"`
	MaxOutputBytes int            `json:"max_output_bytes"`
}

func runRender(ctx context.Context, cfg RenderConfig, ev *evaluator, args map[string]any) (*registry.Result, error) {
	payload, err := json.Marshal(renderJob{Args: args, MaxOutputBytes: cfg.MaxOutputBytes})
	if err != nil {
		return nil, argErrorf("render: the arguments are not JSON: %v", err)
	}
	reply, err := ev.run(ctx, "render", cfg.Timeout.D(), payload, cfg.MaxOutputBytes+maxEvalError)
	if err != nil {
		return nil, evalFailure(ctx, "render", err,
			"the template needed more than %s of memory (render.max_memory_bytes in the config file); "+
				"it builds text that is too large: render fewer items, and do not grow a variable in a loop",
			"the template did not finish within %s of CPU time (render.timeout in the config file); "+
				"it does too much work: render fewer items, and do not call templates from templates that are called many times")
	}
	text := string(reply)
	return textResult(map[string]any{"text": text}, text), nil
}

// evalRender is render's evaluation: a renderJob in, the text out.
func evalRender(ctx context.Context, payload []byte) ([]byte, error) {
	var job renderJob
	if err := decodeJSON(payload, &job); err != nil {
		return nil, fmt.Errorf("render: decoding the job: %w", err)
	}
	text, err := renderText(ctx, job)
	if err != nil {
		return nil, err
	}
	return []byte(text), nil
}

// renderText checks the arguments of job, parses its template and
// executes it.
func renderText(ctx context.Context, job renderJob) (string, error) {
	const tool = "render"
	args := job.Args
	if err := checkKeys(tool, args, "template", "values"); err != nil {
		return "", err
	}
	src, ok, err := stringArg(tool, args, "template")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", argErrorf(`render: argument "template" is required: give a Go text/template such as "Hello {{.name}}"`)
	}
	values, err := objectArg(tool, args, "values")
	if err != nil {
		return "", err
	}
	data, err := normalizeJSON(values)
	if err != nil {
		return "", argErrorf("render: argument \"values\": %v", err)
	}
	if data == nil {
		data = map[string]any{}
	}
	data = renderValue(data)

	budget := maxRenderIterations
	tmpl, err := template.New("render").Option("missingkey=error").Funcs(renderFuncs).
		Funcs(template.FuncMap{rangeGuardFunc: func(v any) (any, error) {
			budget -= rangeLen(v)
			if budget < 0 {
				return nil, errRenderLoops
			}
			return v, nil
		}}).Parse(src)
	if err != nil {
		msg := cleanTemplateError(err)
		hint := "fix the template syntax: actions are {{...}}, blocks end with {{end}}"
		if strings.Contains(msg, "not defined") && strings.Contains(msg, "function") {
			hint = "the functions are " + strings.Join(renderFuncNames, ", ") + " and the text/template builtins (len, index, printf, eq, ...)"
		}
		return "", argErrorf("render: the template does not parse: %s; %s", msg, hint)
	}
	if err := guardTemplates(tmpl); err != nil {
		return "", err
	}

	w := &boundedWriter{ctx: ctx, max: job.MaxOutputBytes}
	err = tmpl.Execute(w, data)
	switch {
	case err == nil:
	case errors.Is(err, errRenderLoops):
		return "", argErrorf("render: the template's loops would run more than %d iterations in all; range over fewer items (e.g. slice the list in a json_query step first)", maxRenderIterations)
	case errors.Is(err, errRenderTooLarge):
		return "", argErrorf("render: the text exceeds %s (render.max_output_bytes in the config file); render less: fewer items (e.g. slice the list in a json_query step first) or shorter text",
			formatBytes(int64(job.MaxOutputBytes)))
	case ctx.Err() != nil:
		return "", fmt.Errorf("render: %w", ctx.Err())
	default:
		msg := cleanTemplateError(err)
		hint := ""
		if strings.Contains(msg, "map has no entry for key") {
			keys := make([]string, 0)
			for k := range data.(map[string]any) {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			hint = fmt.Sprintf("; values has the keys [%s]; for an optional key write {{index . \"key\" | default \"...\"}}", strings.Join(keys, ", "))
		}
		return "", argErrorf("render: the template failed: %s%s", msg, hint)
	}
	return w.b.String(), nil
}
