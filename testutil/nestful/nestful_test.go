package nestful

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/registry"
)

var (
	loadOnce sync.Once
	loaded   *Dataset
	loadErr  error
)

func load(t *testing.T) *Dataset {
	t.Helper()
	dir := Dir(t)
	loadOnce.Do(func() { loaded, loadErr = Load(dir) })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

func toolMap(ds *Dataset) map[string]registry.Tool {
	m := map[string]registry.Tool{}
	for _, t := range ds.Tools {
		m[t.Name] = t
	}
	return m
}

func TestLoad(t *testing.T) {
	ds := load(t)
	for _, s := range ds.Skipped {
		t.Errorf("skipped %s #%d: %s", s.Source, s.Index, s.Reason)
	}
	want := map[string]int{"executable": 85, "glaive": 169, "sgd": 46}
	for src, n := range want {
		if got := ds.Stats.Samples[src]; got+countSkips(ds, src) != n {
			t.Errorf("%s: %d samples + %d skipped, want %d", src, got, countSkips(ds, src), n)
		}
	}
	if len(ds.Samples) != 300 {
		t.Errorf("%d samples converted, want 300", len(ds.Samples))
	}
	// Every tool is a valid catalog entry with object schemas.
	registry.NewCatalog(ds.Tools...)
	for _, tool := range ds.Tools {
		if tool.Description == "" || tool.Source != "nestful" || tool.Call == nil {
			t.Errorf("tool %s: incomplete: %+v", tool.Name, tool)
		}
		if tool.InputSchema.Type != "object" || !reflect.DeepEqual(tool.InputSchema.AdditionalProperties, &jsonschema.Schema{}) {
			t.Errorf("tool %s: input schema is not an open object", tool.Name)
		}
		for _, s := range []*jsonschema.Schema{tool.InputSchema, tool.OutputSchema} {
			if _, err := s.Resolve(nil); err != nil {
				t.Errorf("tool %s: schema does not resolve: %v", tool.Name, err)
			}
		}
	}
	st := ds.Stats
	t.Logf("samples per source: %v; steps %d; tools %d", st.Samples, st.Steps, len(ds.Tools))
	t.Logf("references %d: whole outputs %d, with a path %d, indexed %d, interpolated %d (in %d strings); literals escaped as $$: %d",
		st.References, st.WholeOutputRefs, st.FieldRefs, st.IndexedRefs, st.Interpolations, st.InterpStrings, st.EscapedLiterals)
	t.Logf("widened input types %d (by literal %d, by reference %d); dropped enums %d; relaxed required %d",
		st.WidenedTypes, st.WidenedByLiteral, st.WidenedByRef, st.DroppedEnums, st.RelaxedRequired)
	t.Logf("open output schema points %d, gold references through them %d; extra fields per tool %v",
		st.OpenOutputs, st.OpenOutputRefs, ds.ExtraFields)
	t.Logf("renamed tools %d, renamed fields %d, duplicate specs %d, inferred tools %d, repairs %d",
		st.RenamedTools, st.RenamedFields, st.DuplicateSpecs, st.InferredTools, st.Repairs)
	if testing.Verbose() {
		for _, n := range ds.Notes {
			if n.Kind != NoteRenamedTool {
				t.Logf("note %s %s#%d %s: %s", n.Kind, n.Source, n.Index, n.Tool, n.Detail)
			}
		}
	}
}

func countSkips(ds *Dataset, src string) int {
	n := 0
	for _, s := range ds.Skipped {
		if s.Source == src && s.Index >= 0 {
			n++
		}
	}
	return n
}

var goldRef = regexp.MustCompile(`(?:^|\$)var[0-9]+\b`)

// rawRefs counts the references in the raw data, independently of the
// converter's parser: every reference in NESTFUL names a varN label.
func rawRefs(t *testing.T, dir string) map[string][]int {
	out := map[string][]int{}
	for _, src := range sources {
		data, err := os.ReadFile(filepath.Join(dir, src.data))
		if err != nil {
			t.Fatal(err)
		}
		var samples []struct {
			Output []struct {
				Arguments map[string]any `json:"arguments"`
			} `json:"output"`
		}
		if err := json.Unmarshal(data, &samples); err != nil {
			t.Fatal(err)
		}
		for _, s := range samples {
			n := 0
			for _, c := range s.Output {
				walkStrings(c.Arguments, nil, func(_ []any, str string) { n += len(goldRef.FindAllString(str, -1)) })
			}
			out[src.name] = append(out[src.name], n)
		}
	}
	return out
}

func TestPlans(t *testing.T) {
	ds := load(t)
	tools := toolMap(ds)
	raw := rawRefs(t, Dir(t))
	total := 0
	for _, s := range ds.Samples {
		name := fmt.Sprintf("%s#%d", s.Source, s.Index)
		b, err := json.Marshal(s.Plan)
		if err != nil {
			t.Fatalf("%s: plan does not marshal: %v", name, err)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, s.Plan) {
			t.Errorf("%s: plan does not round-trip through JSON (%v)", name, err)
		}
		steps := planSteps(s.Plan)
		seen := map[string]int{}
		templates := 0
		for i, st := range steps {
			if !idPattern.MatchString(st.id) {
				t.Errorf("%s: step %d id %q is not a step id", name, i, st.id)
			}
			if _, dup := seen[st.id]; dup {
				t.Errorf("%s: step id %q used twice", name, st.id)
			}
			tool, ok := tools[st.tool]
			if !ok || !slices.Contains(s.ToolNames, st.tool) {
				t.Errorf("%s: step %s calls unknown tool %q", name, st.id, st.tool)
			}
			for _, k := range slices.Sorted(maps.Keys(st.args)) {
				walkStrings(st.args[k], nil, func(_ []any, str string) {
					for _, tr := range findTemplates(str) {
						templates++
						j, ok := seen[tr.ID]
						if !ok {
							t.Errorf("%s: step %s argument %s: %s names no earlier step", name, st.id, k, tr.Text)
							continue
						}
						if msg := checkPath(tools[steps[j].tool].OutputSchema, tr.Path); msg != "" {
							t.Errorf("%s: step %s argument %s: %s: %s", name, st.id, k, tr.Text, msg)
						}
					}
					if strings.HasPrefix(str, "$") && !strings.HasPrefix(str, "$$") && !strings.HasPrefix(str, "${") && len(findTemplates(str)) == 0 {
						t.Errorf("%s: step %s argument %s: %q starts with $ but is neither a template nor escaped", name, st.id, k, str)
					}
				})
				if ps := tool.InputSchema.Properties[k]; ps != nil {
					if tr := findTemplates(asString(st.args[k])); len(tr) == 1 && !tr[0].Interpolated {
						got := typesOf(schemaAt(tools[steps[seen[tr[0].ID]].tool].OutputSchema, tr[0].Path))
						if !allFit(got, typesOf(ps)) {
							t.Errorf("%s: step %s argument %s typed %v is fed %v", name, st.id, k, typesOf(ps), got)
						}
					}
				}
			}
			seen[st.id] = i
		}
		if want := raw[s.Source][s.Index]; templates != want {
			t.Errorf("%s: %d templates in the plan, %d references in the gold data", name, templates, want)
		}
		total += templates
	}
	t.Logf("%d templates in %d plans, each naming an earlier step", total, len(ds.Samples))
}

func asString(v any) string { s, _ := v.(string); return s }

// checkPath reports why path does not exist in an output schema, walking it
// as a validator would: properties, items, open additionalProperties.
func checkPath(s *jsonschema.Schema, path []seg) string {
	for i, sg := range path {
		if s == nil || reflect.DeepEqual(s, &jsonschema.Schema{}) {
			return "" // unknown beyond here: accepted
		}
		if sg.IsIndex {
			if types := typesOf(s); len(types) > 0 && !slices.Contains(types, "array") {
				return fmt.Sprintf("%s indexes a %v", pathString(path[:i+1]), types)
			}
			s = s.Items
			continue
		}
		if p := s.Properties[sg.Field]; p != nil {
			s = p
			continue
		}
		if s.AdditionalProperties == nil || isFalseSchema(s.AdditionalProperties) {
			if len(s.Properties) > 0 || isFalseSchema(s.AdditionalProperties) {
				return fmt.Sprintf("%s not declared", pathString(path[:i+1]))
			}
		}
		s = s.AdditionalProperties
	}
	return ""
}

// resolve replaces the templates of v with values from outputs.
func resolve(t *testing.T, v any, outputs map[string]any) any {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "$$") {
			return v[1:]
		}
		trs := findTemplates(v)
		if len(trs) == 1 && !trs[0].Interpolated {
			return lookup(t, outputs[trs[0].ID], trs[0].Path)
		}
		for _, tr := range trs {
			x := lookup(t, outputs[tr.ID], tr.Path)
			s, ok := x.(string)
			if !ok {
				b, _ := json.Marshal(x)
				s = string(b)
			}
			v = strings.Replace(v, tr.Text, s, 1)
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = resolve(t, e, outputs)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = resolve(t, e, outputs)
		}
		return out
	}
	return v
}

func lookup(t *testing.T, v any, path []seg) any {
	t.Helper()
	for _, sg := range path {
		switch x := v.(type) {
		case map[string]any:
			if sg.IsIndex {
				t.Errorf("index %d into an object", sg.Index)
				return nil
			}
			var ok bool
			if v, ok = x[sg.Field]; !ok {
				t.Errorf("field %s missing from the output", sg.Field)
				return nil
			}
		case []any:
			if !sg.IsIndex || sg.Index >= len(x) {
				t.Errorf("segment %+v does not apply to an array of %d", sg, len(x))
				return nil
			}
			v = x[sg.Index]
		default:
			t.Errorf("segment %+v into a %T", sg, v)
			return nil
		}
	}
	return v
}

// TestExecute runs every gold plan with the fake tools: each resolved
// argument set must validate against the tool's input schema, and each
// output against its output schema.
func TestExecute(t *testing.T) {
	ds := load(t)
	tools := toolMap(ds)
	resolved := map[string][2]*jsonschema.Resolved{}
	for name, tool := range tools {
		in, err1 := tool.InputSchema.Resolve(nil)
		out, err2 := tool.OutputSchema.Resolve(nil)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", name, err1, err2)
		}
		resolved[name] = [2]*jsonschema.Resolved{in, out}
	}
	for _, s := range ds.Samples {
		outputs := map[string]any{}
		for _, st := range planSteps(s.Plan) {
			args := resolve(t, st.args, outputs).(map[string]any)
			if err := resolved[st.tool][0].Validate(args); err != nil {
				t.Errorf("%s#%d step %s (%s): arguments invalid: %v", s.Source, s.Index, st.id, st.tool, err)
			}
			res, err := tools[st.tool].Invoke(context.Background(), &registry.CallRequest{Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s#%d step %s: %v", s.Source, s.Index, st.id, err)
			}
			if err := resolved[st.tool][1].Validate(res.Output()); err != nil {
				t.Errorf("%s#%d step %s (%s): output invalid: %v", s.Source, s.Index, st.id, st.tool, err)
			}
			outputs[st.id] = res.Output()
		}
	}
}

func TestMutate(t *testing.T) {
	ds := load(t)
	tools := toolMap(ds)
	counts := map[string]int{}
	for _, s := range ds.Samples {
		before, _ := json.Marshal(s.Plan)
		ms := Mutate(s, tools, rand.New(rand.NewPCG(1, uint64(s.Index))))
		again := Mutate(s, tools, rand.New(rand.NewPCG(1, uint64(s.Index))))
		if !reflect.DeepEqual(ms, again) {
			t.Errorf("%s#%d: Mutate is not deterministic", s.Source, s.Index)
		}
		if after, _ := json.Marshal(s.Plan); string(after) != string(before) {
			t.Fatalf("%s#%d: Mutate changed the sample's plan", s.Source, s.Index)
		}
		kinds := map[string]bool{}
		for _, m := range ms {
			if kinds[m.Kind] {
				t.Errorf("%s#%d: two %s mutations", s.Source, s.Index, m.Kind)
			}
			kinds[m.Kind] = true
			counts[m.Kind]++
			checkMutation(t, s, m, tools)
		}
	}
	n := len(ds.Samples)
	t.Logf("mutations over %d samples: missing_field %d, forward_ref %d, wrong_type %d", n, counts["missing_field"], counts["forward_ref"], counts["wrong_type"])
	for kind, min := range map[string]int{"missing_field": n / 2, "forward_ref": n * 9 / 10, "wrong_type": n / 5} {
		if counts[kind] < min {
			t.Errorf("%s: %d samples, want at least %d", kind, counts[kind], min)
		}
	}
}

// checkMutation verifies that exactly the mutated argument changed and that
// it carries the fault its kind promises.
func checkMutation(t *testing.T, s Sample, m Mutation, tools map[string]registry.Tool) {
	t.Helper()
	name := fmt.Sprintf("%s#%d %s", s.Source, s.Index, m.Kind)
	orig, mut := planSteps(s.Plan), planSteps(m.Plan)
	if len(orig) != len(mut) {
		t.Fatalf("%s: step count changed", name)
	}
	for i := range orig {
		for _, k := range slices.Sorted(maps.Keys(mut[i].args)) {
			changed := !reflect.DeepEqual(orig[i].args[k], mut[i].args[k])
			if changed != (i == m.Step && k == m.Argument) {
				t.Errorf("%s: step %d argument %s changed=%v, mutation says step %d argument %s", name, i, k, changed, m.Step, m.Argument)
			}
		}
	}
	index := map[string]int{}
	for i, st := range mut {
		index[st.id] = i
	}
	var found bool
	walkStrings(mut[m.Step].args[m.Argument], nil, func(_ []any, str string) {
		for _, tr := range findTemplates(str) {
			j, ok := index[tr.ID]
			if !ok {
				continue
			}
			switch m.Kind {
			case "forward_ref":
				found = found || j > m.Step
			case "missing_field":
				found = found || (j < m.Step && checkPath(tools[mut[j].tool].OutputSchema, tr.Path) != "")
			case "wrong_type":
				got := typesOf(schemaAt(tools[mut[j].tool].OutputSchema, tr.Path))
				want := typesOf(tools[mut[m.Step].tool].InputSchema.Properties[m.Argument])
				found = found || (j < m.Step && len(got) > 0 && len(want) > 0 && !allFit(got, want))
			}
		}
	})
	if !found {
		t.Errorf("%s: step %d argument %s = %v does not carry the fault", name, m.Step, m.Argument, mut[m.Step].args[m.Argument])
	}
}

func TestLoadDeterministic(t *testing.T) {
	ds := load(t)
	again, err := Load(Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ds.Samples, again.Samples) || !reflect.DeepEqual(ds.Stats, again.Stats) || !reflect.DeepEqual(ds.Notes, again.Notes) {
		t.Error("two loads differ")
	}
	for i, tool := range ds.Tools {
		a, _ := json.Marshal([]any{tool.InputSchema, tool.OutputSchema})
		b, _ := json.Marshal([]any{again.Tools[i].InputSchema, again.Tools[i].OutputSchema})
		if string(a) != string(b) {
			t.Errorf("tool %s: schemas differ between loads", tool.Name)
		}
		ra, _ := tool.Invoke(context.Background(), nil)
		rb, _ := again.Tools[i].Invoke(context.Background(), nil)
		if !reflect.DeepEqual(ra.Structured, rb.Structured) {
			t.Errorf("tool %s: outputs differ between loads", tool.Name)
		}
	}
}

func TestReferenceForms(t *testing.T) {
	b := &builder{ds: &Dataset{ExtraFields: map[string][]string{}}, defs: map[string]*toolDef{}, names: map[string]string{}}
	d := b.inferTool("t", "test", 0)
	cx := &sampleCtx{prior: map[string]*toolDef{"var1": d, "var3": d}}
	for in, want := range map[string]string{
		"$var1.a.b$":            "$var1.output.a.b",
		"$var1.list[0].x$":      "$var1.output.list[0].x",
		"$var3$":                "$var3.output",
		"$var1.Exchange Rate$":  "$var1.output.Exchange_Rate",
		"5 * $var1.x$":          "5 * ${var1.output.x}",
		"$var1.a$ - $var3.b$":   "${var1.output.a} - ${var3.output.b}",
		"var1.product_id$":      "$var1.output.product_id",
		"$100-$200":             "$$100-$200",
		"$5 for $var1.price$":   "$$5 for ${var1.output.price}",
		"plain text":            "plain text",
		"costs $5, paid $var1$": "costs $5, paid ${var1.output}",
	} {
		got, err := b.convertString(cx, d, nil, in, "arg")
		if err != nil || got != want {
			t.Errorf("convert %q = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := b.convertString(cx, d, nil, "$var2.x$", "arg"); err == nil {
		t.Error("a reference to an unknown label converted without error")
	}
}
