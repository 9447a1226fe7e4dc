package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/testutil/nestful"
)

// The repair section measures planning quality where no real model can
// run: a simulated planner model answers each NESTFUL goal with its gold
// plan perturbed by the mistakes real models make — a misspelled output
// field, a wrong step reference, a missing required argument, a string
// where a number belongs — and, asked to repair, with the gold plan. Its
// mistakes are habits of each tool (the same tool, the same mistake), and
// only mistakes validation can catch are made. With insights, the lessons
// the planner keeps from earlier tasks' repairs are in the planning
// request, and the model does not repeat a mistake a lesson names (the
// tool and the argument): an upper bound on what lessons can do, since a
// real model may not heed them.

// Kinds of mistakes, in the order a tool's habit is picked from.
var mistakeKinds = []string{"misspelled_field", "wrong_reference", "missing_argument", "string_for_number"}

// mistake is one perturbation of one step.
type mistake struct {
	kind string
	step int
	arg  string // the argument changed, by which a lesson is recognised
}

var wholeRef = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_-]*)\.output((?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])+)$`)

// perturb returns plan with step i changed by a mistake of kind, or false
// when kind does not apply to it.
func perturb(plan map[string]any, i int, kind string, tool registry.Tool) (map[string]any, string, bool) {
	p := cloneJSON(plan)
	step := p["steps"].([]any)[i].(map[string]any)
	args, _ := step["arguments"].(map[string]any)
	id, _ := step["id"].(string)
	keys := slices.Sorted(maps.Keys(args))
	switch kind {
	case "misspelled_field":
		for _, k := range keys {
			s, ok := args[k].(string)
			if m := wholeRef.FindStringSubmatch(s); ok && m != nil {
				path := m[2]
				dot := strings.LastIndex(path, ".")
				if dot < 0 || len(path)-dot < 3 {
					continue
				}
				field := path[dot+1:]
				args[k] = "$" + m[1] + ".output" + path[:dot+1] + field[:len(field)-1] + "s" // "total" -> "totas"
				return p, k, true
			}
		}
	case "wrong_reference":
		for _, k := range keys {
			s, ok := args[k].(string)
			if m := wholeRef.FindStringSubmatch(s); ok && m != nil && id != "" {
				args[k] = "$" + id + ".output" + m[2] // the step itself, not the one before
				return p, k, true
			}
		}
	case "missing_argument":
		if tool.InputSchema != nil {
			for _, k := range tool.InputSchema.Required {
				if _, ok := args[k]; ok {
					delete(args, k)
					return p, k, true
				}
			}
		}
	case "string_for_number":
		for _, k := range keys {
			if n, ok := args[k].(float64); ok {
				args[k] = fmt.Sprint(n)
				return p, k, true
			}
		}
	}
	return nil, "", false
}

// habit is the kind of mistake a tool's calls get first.
func habit(tool string) int {
	h := fnv.New32a()
	h.Write([]byte(tool))
	return int(h.Sum32() % uint32(len(mistakeKinds)))
}

// mistakesFor picks, for each step, the first kind of mistake in its tool's
// order that applies and that validation reports at that step.
func mistakesFor(e *orchestrate.Engine, plan map[string]any, tools map[string]registry.Tool) []mistake {
	steps, _ := plan["steps"].([]any)
	var out []mistake
	for i, s := range steps {
		name, _ := s.(map[string]any)["tool"].(string)
		if name == nestful.ResultTool {
			continue
		}
		for j := range mistakeKinds {
			kind := mistakeKinds[(habit(name)+j)%len(mistakeKinds)]
			bad, arg, ok := perturb(plan, i, kind, tools[name])
			if ok && caughtAt(e, bad, i) {
				out = append(out, mistake{kind: kind, step: i, arg: arg})
				break
			}
		}
	}
	return out
}

// caughtAt reports whether validation reports an error at top-level step i.
func caughtAt(e *orchestrate.Engine, plan map[string]any, i int) bool {
	data, _ := json.Marshal(plan)
	p, issues := orchestrate.DecodePlan(data)
	if len(issues) > 0 {
		return false
	}
	for _, is := range e.Validate(&orchestrate.Request{Plan: p}).Errors {
		if is.Step != nil && *is.Step == i {
			return true
		}
	}
	return false
}

// bookLessons keeps lessons in memory as the store does: counted per tool
// and key, the most seen first.
type bookLessons struct {
	mu      sync.Mutex
	lessons []planner.Lesson
}

func (b *bookLessons) Recall(_ context.Context, tools []string, n int) []planner.Lesson {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []planner.Lesson
	for _, l := range b.lessons {
		if slices.Contains(tools, l.Tool) {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b planner.Lesson) int { return b.Count - a.Count })
	return out[:min(n, len(out))]
}

func (b *bookLessons) Learn(_ context.Context, ls []planner.Lesson) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range ls {
		i := slices.IndexFunc(b.lessons, func(x planner.Lesson) bool { return x.Tool == l.Tool && x.Key == l.Key })
		if i < 0 {
			l.Count = 1
			b.lessons = append(b.lessons, l)
			continue
		}
		b.lessons[i].Count++
		b.lessons[i].Text = l.Text
	}
}

// heeded reports whether the planning request shows a lesson about tool
// that names arg.
func heeded(req *llm.Request, tool, arg string) bool {
	if len(req.Messages) == 0 {
		return false
	}
	for _, line := range strings.Split(req.Messages[0].Content, "\n") {
		if strings.HasPrefix(line, "- "+tool+": ") && strings.Contains(line, "write "+arg+": ") {
			return true
		}
	}
	return false
}

// repairOutcome is one task's planning under one condition.
type repairOutcome struct {
	first, valid          bool
	calls, tin, tout, bad int // bad: mistakes in the first answer
}

// planTask plans one task with the simulated model and lessons (nil for
// none).
func planTask(ctx context.Context, s nestful.Sample, tools []registry.Tool, byName map[string]registry.Tool, lessons planner.Lessons) (repairOutcome, error) {
	cat := registry.NewCatalog(tools...)
	e := orchestrate.NewEngine(orchestrate.Options{Tools: cat, Limits: orchestrate.Limits{MaxSteps: 64, MaxTemplates: 4096}})
	mistakes := mistakesFor(e, s.Plan, byName)
	var o repairOutcome
	m := &simModel{answer: func(req *llm.Request) *llm.Response {
		plan := s.Plan
		if len(req.Messages) == 1 { // the first answer; a repair sees the errors
			for _, mk := range mistakes {
				name := plan["steps"].([]any)[mk.step].(map[string]any)["tool"].(string)
				if heeded(req, name, mk.arg) {
					continue
				}
				if bad, _, ok := perturb(plan, mk.step, mk.kind, byName[name]); ok {
					plan = bad
					o.bad++
				}
			}
		}
		args, _ := json.Marshal(plan)
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "plan", Name: planner.ToolName, Arguments: args}}, StopReason: llm.StopToolUse}
	}}
	opts := planner.Options{Catalog: cat, Engine: e, Model: m}
	if lessons != nil {
		opts.Lessons = lessons
	}
	res, err := planner.New(opts).Plan(ctx, &orchestrate.Request{Prompt: s.Input})
	o.valid = err == nil
	o.first = err == nil && res.Info.Attempts == 1
	o.calls, o.tin, o.tout = res.Info.ModelCalls, res.Info.InputTokens, res.Info.OutputTokens
	if err != nil && !errors.Is(err, planner.ErrGaveUp) {
		return o, err
	}
	return o, nil
}

// repairQuality runs the repair section.
func repairQuality(ctx context.Context, c *options, r *report) error {
	ds, err := loadNestful(c, r)
	if ds == nil {
		return err
	}
	byName := map[string]registry.Tool{}
	for _, t := range ds.Tools {
		byName[t.Name] = t
	}
	samples := ds.Samples
	if c.tasks > 0 && c.tasks < len(samples) {
		step := float64(len(samples)) / float64(c.tasks)
		var picked []nestful.Sample
		for i := range c.tasks {
			picked = append(picked, samples[int(float64(i)*step)])
		}
		samples = picked
	}
	names := []string{"without insights", "with insights"}
	var rows [][]string
	for k, name := range names {
		var lessons planner.Lessons
		if k == 1 {
			lessons = &bookLessons{}
		}
		var n, first, valid, withMistakes int
		var calls, tin, tout float64
		// In task order: with insights, earlier tasks teach later ones.
		for _, s := range samples {
			var tools []registry.Tool
			for _, t := range s.ToolNames {
				tools = append(tools, byName[t])
			}
			o, err := planTask(ctx, s, tools, byName, lessons)
			if err != nil {
				return fmt.Errorf("%s #%d: %w", s.Source, s.Index, err)
			}
			n++
			if o.first {
				first++
			}
			if o.valid {
				valid++
			}
			if o.bad > 0 {
				withMistakes++
			}
			calls += float64(o.calls)
			tin += float64(o.tin)
			tout += float64(o.tout)
		}
		pct := func(x int) string { return f1(100 * float64(x) / float64(n)) }
		rows = append(rows, []string{name, itoa(n), pct(withMistakes), pct(first), pct(valid), f2(calls / float64(n)), f1(tin / float64(n)), f1(tout / float64(n))})
	}
	fmt.Fprintf(r.w, "%d NESTFUL tasks; a simulated model answers with the gold plan perturbed by each tool's habitual mistake and repairs with the gold plan; tokens = JSON bytes / 4\n", len(samples))
	return r.table("repair", []string{"condition", "tasks", "first_answer_wrong_pct", "valid_first_try_pct", "valid_after_repair_pct", "model_calls", "tokens_in", "tokens_out"}, rows)
}

func cloneJSON(m map[string]any) map[string]any {
	data, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}
