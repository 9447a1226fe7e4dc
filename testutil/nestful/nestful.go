package nestful

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// Sample is one NESTFUL sequence converted to an orchestra plan.
type Sample struct {
	// Source is the file the sample comes from: "executable", "glaive" or "sgd".
	Source string
	// Index is the sample's position in its data file.
	Index int
	// Input is the natural-language query.
	Input string
	// Plan is the orchestra plan: {"steps": [{"id", "tool", "arguments"}, ...]}.
	Plan map[string]any
	// ToolNames lists the catalog names the plan calls, in order of first use.
	ToolNames []string
}

// Skip is a sample or a tool that could not be converted, and why.
type Skip struct {
	Source string
	Index  int // -1 for a tool
	Reason string
}

// Note records one place where the dataset needed a decision: a repair of
// the gold data, a renamed tool or field, a widened input type, an output
// schema opened for a field the spec does not declare.
type Note struct {
	Kind   string // one of the Note* constants
	Source string
	Index  int // the sample, or -1 when the note is about a tool
	Tool   string
	Detail string
}

// Kinds of Note.
const (
	NoteRenamedTool     = "renamed_tool"     // a spec name that is not a catalog name
	NoteRenamedField    = "renamed_field"    // an output field name that is not a template path segment
	NoteDuplicateSpec   = "duplicate_spec"   // a function specified more than once
	NoteInferredTool    = "inferred_tool"    // a tool the data calls but no spec describes
	NoteRepairedLabel   = "repaired_label"   // a label used twice, renamed to its position's label
	NoteRepairedRef     = "repaired_ref"     // a reference missing one of its $ delimiters
	NoteShiftedResult   = "shifted_result"   // var_result references off by one label
	NoteWidenedType     = "widened_type"     // an input type the gold data contradicts
	NoteDroppedEnum     = "dropped_enum"     // an enum the gold data contradicts
	NoteRelaxedRequired = "relaxed_required" // a required parameter some gold call omits
	NoteOpenOutput      = "open_output"      // an output path the data references but the spec lacks
	NoteUnknownType     = "unknown_type"     // a type string with no JSON Schema meaning
)

// Stats counts what Load converted and decided.
type Stats struct {
	Samples          map[string]int // per source
	Steps            int            // steps in all plans, var_result included
	References       int            // NESTFUL references in the gold data
	WholeOutputRefs  int            // $var3$: a step's whole output
	FieldRefs        int            // references with a path
	IndexedRefs      int            // paths with an [i] index
	Interpolations   int            // references inside a longer string
	InterpStrings    int            // strings holding interpolations
	EscapedLiterals  int            // literal strings starting with $, escaped as $$
	RenamedTools     int
	RenamedFields    int
	DuplicateSpecs   int
	InferredTools    int
	Repairs          int // repaired labels and references, shifted var_result references
	WidenedTypes     int // input properties (tool + path) whose type was widened
	WidenedByLiteral int // of which because of a gold literal
	WidenedByRef     int // of which because of a gold reference's field type
	DroppedEnums     int
	RelaxedRequired  int
	OpenOutputs      int // output schema points opened (tool + path)
	OpenOutputRefs   int // gold references that go through an opened point
}

// Dataset is NESTFUL converted.
type Dataset struct {
	Samples []Sample
	// Tools holds one tool per spec function (deduplicated), the tools the
	// data calls without a spec, and var_result, sorted by name.
	Tools   []registry.Tool
	Skipped []Skip
	Stats   Stats
	Notes   []Note
	// ExtraFields lists, per tool, the output paths the gold data references
	// that the tool's spec does not declare; the fake tool returns values there.
	ExtraFields map[string][]string
	// Renamed maps original spec names to catalog names where they differ.
	Renamed map[string]string
}

// ResultTool is the name of the tool that the final var_result pseudo-call calls.
const ResultTool = "var_result"

var sources = []struct{ name, data, spec string }{
	{"executable", "executable-data.json", "executable-spec.json"},
	{"glaive", "non-executable-glaive-data.json", "non-executable-glaive-spec.json"},
	{"sgd", "non-executable-sgd-data.json", "non-executable-sgd-spec.json"},
}

// Load reads the NESTFUL folder dir and converts every sample and spec.
func Load(dir string) (*Dataset, error) {
	b := &builder{
		ds:    &Dataset{ExtraFields: map[string][]string{}, Renamed: map[string]string{}},
		defs:  map[string]*toolDef{},
		names: map[string]string{},
	}
	b.ds.Stats.Samples = map[string]int{}
	for _, src := range sources {
		var specs []map[string]any
		if err := readJSON(filepath.Join(dir, src.spec), &specs); err != nil {
			return nil, err
		}
		for _, sp := range specs {
			b.addSpec(src.name, sp)
		}
	}
	b.addResultTool()
	for _, src := range sources {
		var data []struct {
			Input  string           `json:"input"`
			Output []map[string]any `json:"output"`
		}
		if err := readJSON(filepath.Join(dir, src.data), &data); err != nil {
			return nil, err
		}
		for i, d := range data {
			s, err := b.convertSample(src.name, i, d.Input, d.Output)
			if err != nil {
				b.ds.Skipped = append(b.ds.Skipped, Skip{Source: src.name, Index: i, Reason: err.Error()})
				continue
			}
			b.ds.Samples = append(b.ds.Samples, s)
			b.ds.Stats.Samples[src.name]++
		}
	}
	b.finish()
	return b.ds, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading NESTFUL: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

// toolDef is a tool being built.
type toolDef struct {
	orig, name, desc, source string
	in, out                  *jsonschema.Schema
	inferred, result         bool
	raw                      string // canonical JSON of the spec, to compare duplicates
	extras                   *extra
	opened                   map[*jsonschema.Schema]bool
	noted                    map[string]bool
}

// extra records the output paths the data references, so that the fake
// output has values there even where the spec declares nothing.
type extra struct {
	fields   map[string]*extra
	index    *extra
	maxIndex int
	leaf     string // JSON type wanted at an undeclared leaf
}

func (e *extra) field(f string) *extra {
	if e.fields == nil {
		e.fields = map[string]*extra{}
	}
	if e.fields[f] == nil {
		e.fields[f] = &extra{}
	}
	return e.fields[f]
}

func (e *extra) at(i int) *extra {
	if e.index == nil {
		e.index = &extra{}
	}
	e.maxIndex = max(e.maxIndex, i)
	return e.index
}

type builder struct {
	ds    *Dataset
	defs  map[string]*toolDef // by original name
	names map[string]string   // catalog name -> original name
}

func (b *builder) note(kind, source string, index int, tool, format string, args ...any) {
	b.ds.Notes = append(b.ds.Notes, Note{Kind: kind, Source: source, Index: index, Tool: tool, Detail: fmt.Sprintf(format, args...)})
}

// noteOnce records a tool-level note once per key and reports whether it was new.
func (b *builder) noteOnce(d *toolDef, key, kind, source string, index int, format string, args ...any) bool {
	if d.noted[kind+"\x00"+key] {
		return false
	}
	d.noted[kind+"\x00"+key] = true
	b.note(kind, source, index, d.name, format, args...)
	return true
}

func (b *builder) newDef(orig, source string) *toolDef {
	name := toolName(orig)
	for n := 2; b.names[name] != ""; n++ {
		name = fmt.Sprintf("%s_%d", toolName(orig), n)
	}
	b.names[name] = orig
	d := &toolDef{orig: orig, name: name, source: source, extras: &extra{}, opened: map[*jsonschema.Schema]bool{}, noted: map[string]bool{}}
	if name != orig {
		b.ds.Renamed[orig] = name
		b.ds.Stats.RenamedTools++
		b.note(NoteRenamedTool, source, -1, name, "%q is not a catalog name; renamed %q", orig, name)
	}
	b.defs[orig] = d
	return d
}

// paramSections are the keys under which specs list a function's parameters.
var paramSections = []string{"parameters", "arguments", "query_parameters", "path_parameters", "body_parameters", "header_parameters"}

func (b *builder) addSpec(source string, sp map[string]any) {
	orig, _ := sp["name"].(string)
	raw, _ := json.Marshal(sp)
	if old, ok := b.defs[orig]; ok {
		b.ds.Stats.DuplicateSpecs++
		if old.raw == string(raw) {
			b.note(NoteDuplicateSpec, source, -1, old.name, "specified again, identically; one tool kept")
		} else {
			b.note(NoteDuplicateSpec, source, -1, old.name, "specified again differently; the first spec (%s) kept", old.source)
		}
		return
	}
	if orig == "" {
		b.ds.Skipped = append(b.ds.Skipped, Skip{Source: source, Index: -1, Reason: "a spec function without a name"})
		return
	}
	d := b.newDef(orig, source)
	d.raw = string(raw)
	d.desc, _ = sp["description"].(string)
	d.in = &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{}}
	for _, sec := range paramSections {
		params, _ := sp[sec].(map[string]any)
		if props, ok := params["properties"].(map[string]any); ok && params["type"] == "object" {
			// A JSON Schema object rather than a map of parameters.
			for _, r := range stringList(params["required"]) {
				d.in.Required = append(d.in.Required, r)
			}
			params = props
		}
		for _, name := range slices.Sorted(maps.Keys(params)) {
			pv := params[name]
			d.in.Properties[name] = b.schemaFor(d, pv, "input."+name, false)
			if isRequired(pv) && !slices.Contains(d.in.Required, name) {
				d.in.Required = append(d.in.Required, name)
			}
		}
	}
	sort.Strings(d.in.Required)
	d.out = &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}}
	outs, ok := sp["output_parameters"].(map[string]any)
	if !ok {
		d.out.AdditionalProperties = &jsonschema.Schema{}
		d.opened[d.out] = true
	}
	b.properties(d, d.out, outs, "output")
}

// properties fills s.Properties from a spec's map of parameters; output
// field names are made template-safe.
func (b *builder) properties(d *toolDef, s *jsonschema.Schema, params map[string]any, where string) {
	for _, name := range slices.Sorted(maps.Keys(params)) {
		key := name
		if strings.HasPrefix(where, "output") {
			key = fieldName(name)
			if key != name {
				if _, taken := params[key]; taken {
					b.note(NoteRenamedField, d.source, -1, d.name, "%s.%q would become %q, which is taken; left out", where, name, key)
					continue
				}
				b.ds.Stats.RenamedFields++
				b.note(NoteRenamedField, d.source, -1, d.name, "%s.%q renamed %q in the schema and in references", where, name, key)
			}
		}
		s.Properties[key] = b.schemaFor(d, params[name], where+"."+key, strings.HasPrefix(where, "output"))
	}
}

// schemaFor converts one parameter of a spec.
func (b *builder) schemaFor(d *toolDef, v any, where string, output bool) *jsonschema.Schema {
	s := &jsonschema.Schema{}
	var typ any
	m, isMap := v.(map[string]any)
	if isMap {
		typ = m["type"]
		s.Description, _ = m["description"].(string)
	} else {
		typ = v // a bare type string
	}
	types, items, ok := mapType(typ)
	if !ok {
		b.note(NoteUnknownType, d.source, -1, d.name, "%s: type %v has no JSON Schema meaning; left untyped", where, typ)
	}
	setTypes(s, types)
	s.Items = items
	if !isMap {
		return s
	}
	switch it := m["items"].(type) {
	case map[string]any, string:
		s.Items = b.schemaFor(d, it, where+"[]", output)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		s.Properties = map[string]*jsonschema.Schema{}
		b.properties(d, s, props, where)
		if !output {
			s.Required = stringList(m["required"])
		}
		if len(types) == 0 {
			setTypes(s, []string{"object"})
		}
	}
	keys := []string{"enum", "allowed_values"}
	if output {
		keys = []string{"enum", "possible_values", "allowed_values"}
	}
	{
		for _, k := range keys {
			if e, ok := m[k].([]any); ok && len(e) > 0 && s.Enum == nil {
				s.Enum = e
			}
		}
	}
	return s
}

func isRequired(v any) bool {
	m, _ := v.(map[string]any)
	if opt, ok := m["optional"].(bool); ok && opt {
		return false
	}
	switch r := m["required"].(type) {
	case bool:
		return r
	case string:
		return strings.EqualFold(r, "true")
	}
	return false
}

func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (b *builder) addResultTool() {
	d := b.newDef(ResultTool, "nestful")
	d.result = true
	d.desc = "Collects the sequence's results: returns its arguments as its output."
	d.in = &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{}}
	d.out = &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{}}
}

// inferTool makes a tool for a name the data calls but no spec describes.
func (b *builder) inferTool(orig, source string, index int) *toolDef {
	d := b.newDef(orig, source)
	d.inferred = true
	d.desc = "Not described by the NESTFUL specs; its parameters are inferred from the gold calls."
	d.in = &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{}}
	d.out = &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{}}
	d.opened[d.out] = true
	b.ds.Stats.InferredTools++
	b.note(NoteInferredTool, source, index, d.name, "called by the data but absent from every spec: untyped inputs, open output")
	return d
}

var (
	idPattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	varLabel   = regexp.MustCompile(`^var([0-9]+)$`)
	noOpenRef  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)((?:\.[^.$\[\]]+|\[[0-9]+\])+)\$$`)
	noCloseRef = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_-]*)((?:\.[^.$\[\]]+|\[[0-9]+\])*)$`)
)

// sampleCtx is the state of one sample's conversion.
type sampleCtx struct {
	source string
	index  int
	prior  map[string]*toolDef // step id -> tool of the steps so far
	rename map[string]string   // label in a reference -> step id
}

func (b *builder) convertSample(source string, index int, input string, calls []map[string]any) (Sample, error) {
	s := Sample{Source: source, Index: index, Input: input}
	if len(calls) == 0 {
		return s, fmt.Errorf("no calls")
	}
	allLabels := map[string]bool{}
	for _, c := range calls {
		if l, ok := c["label"].(string); ok {
			allLabels[l] = true
		}
	}
	cx := &sampleCtx{source: source, index: index, prior: map[string]*toolDef{}}
	var steps []any
	used := map[string]bool{}
	for pos, c := range calls {
		orig, _ := c["name"].(string)
		if orig == "" {
			return s, fmt.Errorf("call %d has no name", pos)
		}
		args, ok := c["arguments"].(map[string]any)
		if !ok && c["arguments"] != nil {
			return s, fmt.Errorf("call %d (%s): arguments are %T, not an object", pos, orig, c["arguments"])
		}
		label, _ := c["label"].(string)
		isResult := orig == ResultTool
		var id string
		switch {
		case label != "":
			if !idPattern.MatchString(label) {
				return s, fmt.Errorf("call %d (%s): label %q is not a step id", pos, orig, label)
			}
			id = label
			if _, dup := cx.prior[label]; dup {
				cand := fmt.Sprintf("var%d", pos+1)
				if !varLabel.MatchString(label) || allLabels[cand] {
					return s, fmt.Errorf("call %d (%s): label %q used twice", pos, orig, label)
				}
				id = cand
				b.ds.Stats.Repairs++
				b.note(NoteRepairedLabel, source, index, "", "call %d reuses label %q; relabelled %q after its position", pos, label, cand)
			}
		case isResult:
			id = ResultTool
		default:
			id = fmt.Sprintf("step%d", pos+1)
		}
		for base := id; used[id] || (label == "" && allLabels[id]); {
			id += "_"
			if len(id) > len(base)+8 {
				return s, fmt.Errorf("call %d: no free step id near %q", pos, base)
			}
		}
		used[id] = true

		d := b.defs[orig]
		if d == nil {
			d = b.inferTool(orig, source, index)
		}
		cx.rename = nil
		if isResult {
			if err := b.shiftResultRefs(cx, args, pos); err != nil {
				return s, err
			}
		}
		out, err := b.convertArgs(cx, d, args, pos)
		if err != nil {
			return s, fmt.Errorf("call %d (%s): %w", pos, orig, err)
		}
		steps = append(steps, map[string]any{"id": id, "tool": d.name, "arguments": out})
		if !slices.Contains(s.ToolNames, d.name) {
			s.ToolNames = append(s.ToolNames, d.name)
		}
		cx.prior[id] = d
	}
	b.ds.Stats.Steps += len(steps)
	s.Plan = map[string]any{"steps": steps}
	return s, nil
}

// shiftResultRefs handles a var_result whose references are off by one
// label ($var2$ and $var3$ after steps var1 and var2): when some reference
// names no step and every reference shifted down by one does, the shift is
// what the sequence means.
func (b *builder) shiftResultRefs(cx *sampleCtx, args map[string]any, pos int) error {
	var labels []string
	collectRefs(args, func(r ref) { labels = append(labels, r.ID) })
	dangling := false
	for _, l := range labels {
		if cx.prior[l] == nil {
			dangling = true
		}
	}
	if !dangling {
		return nil
	}
	rename := map[string]string{}
	for _, l := range labels {
		m := varLabel.FindStringSubmatch(l)
		if m == nil {
			return fmt.Errorf("call %d (var_result): reference to %q, which names no earlier step", pos, l)
		}
		var n int
		fmt.Sscan(m[1], &n)
		shifted := fmt.Sprintf("var%d", n-1)
		if cx.prior[shifted] == nil {
			return fmt.Errorf("call %d (var_result): reference to %q, which names no earlier step", pos, l)
		}
		rename[l] = shifted
	}
	cx.rename = rename
	b.ds.Stats.Repairs++
	b.note(NoteShiftedResult, cx.source, cx.index, "", "var_result references %v name no step or the wrong one; each shifted down by one label", slices.Sorted(maps.Keys(rename)))
	return nil
}

func collectRefs(v any, f func(ref)) {
	switch v := v.(type) {
	case string:
		for _, p := range splitNestful(repairDelims(v)) {
			if p.Ref != nil {
				f(*p.Ref)
			}
		}
	case []any:
		for _, e := range v {
			collectRefs(e, f)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			collectRefs(v[k], f)
		}
	}
}

// repairDelims adds the $ a reference is missing at one end
// ("var1.product_id$"), if the string is otherwise exactly a reference.
func repairDelims(s string) string {
	if nestfulRef.MatchString(s) {
		return s
	}
	if noOpenRef.MatchString(s) {
		return "$" + s
	}
	if m := noCloseRef.FindStringSubmatch(s); m != nil && varLabel.MatchString(m[1]) {
		return s + "$"
	}
	return s
}

func (b *builder) convertArgs(cx *sampleCtx, d *toolDef, args map[string]any, pos int) (map[string]any, error) {
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		ps := d.in.Properties[k]
		if ps == nil && d.inferred {
			ps = &jsonschema.Schema{Description: "Inferred from the gold calls."}
			d.in.Properties[k] = ps
		}
		v, err := b.convertValue(cx, d, ps, args[k], k)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %w", k, err)
		}
		out[k] = v
	}
	var required []string
	for _, r := range d.in.Required {
		if _, ok := args[r]; ok {
			required = append(required, r)
			continue
		}
		b.ds.Stats.RelaxedRequired++
		b.note(NoteRelaxedRequired, cx.source, cx.index, d.name, "required parameter %q missing from gold call %d; no longer required", r, pos)
	}
	d.in.Required = required
	return out, nil
}

// convertValue converts one argument value (templates, escapes) and
// reconciles the input schema s with it.
func (b *builder) convertValue(cx *sampleCtx, d *toolDef, s *jsonschema.Schema, v any, where string) (any, error) {
	switch v := v.(type) {
	case string:
		return b.convertString(cx, d, s, v, where)
	case []any:
		b.checkLiteral(cx, d, s, v, where)
		var items *jsonschema.Schema
		if s != nil && hasType(s, "array") {
			items = s.Items
		}
		out := make([]any, len(v))
		for i, e := range v {
			c, err := b.convertValue(cx, d, items, e, where+"[]")
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		b.checkLiteral(cx, d, s, v, where)
		out := map[string]any{}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			var ps *jsonschema.Schema
			if s != nil && hasType(s, "object") {
				ps = s.Properties[k]
			}
			c, err := b.convertValue(cx, d, ps, v[k], where+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	default:
		b.checkLiteral(cx, d, s, v, where)
		return v, nil
	}
}

func (b *builder) convertString(cx *sampleCtx, d *toolDef, s *jsonschema.Schema, v, where string) (any, error) {
	if r := repairDelims(v); r != v {
		b.ds.Stats.Repairs++
		b.note(NoteRepairedRef, cx.source, cx.index, d.name, "%s: %q is missing a $; read as %q", where, v, r)
		v = r
	}
	parts := splitNestful(v)
	if len(parts) == 1 && parts[0].Ref == nil {
		b.checkLiteral(cx, d, s, v, where)
		if strings.Contains(v, "${") {
			return nil, fmt.Errorf("literal %q contains ${, which a plan cannot express", v)
		}
		if strings.HasPrefix(v, "$") {
			b.ds.Stats.EscapedLiterals++
			return "$" + v, nil
		}
		return v, nil
	}
	whole := len(parts) == 1
	var sb strings.Builder
	for i, p := range parts {
		if p.Ref == nil {
			if strings.Contains(p.Lit, "${") {
				return nil, fmt.Errorf("literal text %q contains ${, which a plan cannot express", p.Lit)
			}
			if i == 0 && strings.HasPrefix(p.Lit, "$") {
				sb.WriteByte('$')
				b.ds.Stats.EscapedLiterals++
			}
			sb.WriteString(p.Lit)
			continue
		}
		r, err := b.useRef(cx, d, s, *p.Ref, !whole, where)
		if err != nil {
			return nil, err
		}
		if whole {
			return r.whole(), nil
		}
		sb.WriteString(r.interp())
	}
	b.ds.Stats.InterpStrings++
	return sb.String(), nil
}

// useRef maps a NESTFUL reference to its step, makes sure the referenced
// output schema has the path (opening it where the spec is incomplete), and
// widens the argument's type when the field's type does not fit it.
func (b *builder) useRef(cx *sampleCtx, d *toolDef, s *jsonschema.Schema, r ref, interpolated bool, where string) (ref, error) {
	if n, ok := cx.rename[r.ID]; ok {
		r.ID = n
	}
	target := cx.prior[r.ID]
	if target == nil {
		return r, fmt.Errorf("reference $%s%s$ names no earlier step", r.ID, pathString(r.Path))
	}
	path := make([]seg, len(r.Path))
	for i, sg := range r.Path {
		if !sg.IsIndex {
			sg.Field = fieldName(sg.Field)
		}
		path[i] = sg
	}
	r.Path = path
	st := &b.ds.Stats
	st.References++
	if len(path) == 0 {
		st.WholeOutputRefs++
	} else {
		st.FieldRefs++
	}
	if slices.ContainsFunc(path, func(sg seg) bool { return sg.IsIndex }) {
		st.IndexedRefs++
	}
	if interpolated {
		st.Interpolations++
	}
	want := typesOf(s)
	got, runtime := b.resolveOut(cx, target, path, want, interpolated)
	switch {
	case s == nil || len(want) == 0:
	case got == nil && !interpolated && !fits(runtime, want):
		// The field is undeclared; its fake value has the type the first
		// consumer wanted, which this argument does not accept.
		b.widen(cx, d, s, []string{runtime}, where, fmt.Sprintf("is fed %s, an undeclared field another call uses as %s", r.whole(), runtime), true)
	case interpolated:
		if !slices.Contains(want, "string") {
			b.widen(cx, d, s, []string{"string"}, where, fmt.Sprintf("interpolates %s into a string", r.interp()), true)
		}
	case !allFit(got, want):
		b.widen(cx, d, s, got, where, fmt.Sprintf("is fed %s of type %v", r.whole(), got), true)
	}
	return r, nil
}

// resolveOut walks path in target's output schema, opening the schema where
// the spec does not declare what the gold data references. It returns the
// types at the end of the path (nil when unknown) and, when they are
// unknown, the type of the fake value there.
func (b *builder) resolveOut(cx *sampleCtx, t *toolDef, path []seg, want []string, interpolated bool) ([]string, string) {
	cur, ex := t.out, t.extras
	throughOpen := t.opened[t.out] && len(path) > 0
	open := func(s *jsonschema.Schema, at int, why string) {
		key := pathString(path[:at+1])
		if b.noteOnce(t, key, NoteOpenOutput, cx.source, cx.index, "%s: %s; schema opened there", key, why) {
			b.ds.Stats.OpenOutputs++
		}
		b.extraField(t, key)
		t.opened[s] = true
		throughOpen = true
	}
	for i, sg := range path {
		if sg.IsIndex {
			ex = ex.at(sg.Index)
		} else {
			ex = ex.field(sg.Field)
		}
		if cur == nil {
			continue
		}
		if sg.IsIndex {
			types := typesOf(cur)
			switch {
			case len(types) > 0 && !slices.Contains(types, "array"):
				open(cur, i, fmt.Sprintf("indexed, but the spec says %v", types))
				setTypes(cur, nil)
				cur = nil
			case cur.Items == nil:
				open(cur, i, "indexed, but the spec declares no items")
				cur.Items = &jsonschema.Schema{}
				cur = nil
			default:
				if t.opened[cur] {
					throughOpen = true
				}
				cur = cur.Items
			}
			continue
		}
		if p := cur.Properties[sg.Field]; p != nil {
			cur = p
			continue
		}
		if t.opened[cur] {
			throughOpen = true
			if t.inferred {
				b.extraField(t, pathString(path[:i+1]))
			} else {
				open(cur, i, "not declared by the spec")
			}
			cur = nil
			continue
		}
		types := typesOf(cur)
		why := "not declared by the spec"
		if len(types) > 0 && !slices.Contains(types, "object") {
			why = fmt.Sprintf("a field of a value the spec types %v", types)
			setTypes(cur, nil)
		}
		open(cur, i, why)
		cur.AdditionalProperties = &jsonschema.Schema{}
		cur = nil
	}
	if throughOpen {
		b.ds.Stats.OpenOutputRefs++
	}
	if cur != nil {
		return typesOf(cur), ""
	}
	if ex.leaf == "" {
		ex.leaf = "string"
		if !interpolated && len(want) > 0 && !slices.Contains(want, "string") {
			for _, w := range want {
				if w != "null" {
					ex.leaf = w
					break
				}
			}
		}
	}
	if len(ex.fields) > 0 {
		return nil, "object"
	}
	if ex.index != nil {
		return nil, "array"
	}
	return nil, ex.leaf
}

// extraField records an undeclared output path of t that the data references.
func (b *builder) extraField(t *toolDef, key string) {
	if !t.noted["extra\x00"+key] {
		t.noted["extra\x00"+key] = true
		b.ds.ExtraFields[t.name] = append(b.ds.ExtraFields[t.name], key)
	}
}

// checkLiteral widens s when a gold literal contradicts its type, and drops
// an enum the literal is not in.
func (b *builder) checkLiteral(cx *sampleCtx, d *toolDef, s *jsonschema.Schema, v any, where string) {
	if s == nil {
		return
	}
	jt := schemas.ValueType(v)
	if types := typesOf(s); len(types) > 0 && !fits(jt, types) {
		b.widen(cx, d, s, []string{jt}, where, fmt.Sprintf("is given %s %s", jt, short(v)), false)
	}
	if len(s.Enum) > 0 && !containsJSON(s.Enum, v) {
		if b.noteOnce(d, where, NoteDroppedEnum, cx.source, cx.index, "%s: gold value %s is not in the enum %v; enum dropped", where, short(v), s.Enum) {
			b.ds.Stats.DroppedEnums++
		}
		s.Enum = nil
	}
}

func (b *builder) widen(cx *sampleCtx, d *toolDef, s *jsonschema.Schema, add []string, where, why string, byRef bool) {
	before := typesOf(s)
	setTypes(s, addTypes(slices.Clone(before), add...))
	if d.inferred {
		return
	}
	if b.noteOnce(d, where, NoteWidenedType, cx.source, cx.index, "%s: typed %v in the spec, but the gold data %s; widened to %v", where, before, why, typesOf(s)) {
		b.ds.Stats.WidenedTypes++
		if byRef {
			b.ds.Stats.WidenedByRef++
		} else {
			b.ds.Stats.WidenedByLiteral++
		}
	}
}

func short(v any) string {
	j, _ := json.Marshal(v)
	if len(j) > 60 {
		return string(j[:57]) + "..."
	}
	return string(j)
}

// finish closes the output objects nobody opened and builds the tools.
func (b *builder) finish() {
	for _, orig := range slices.Sorted(maps.Keys(b.defs)) {
		d := b.defs[orig]
		if !d.result {
			closeObjects(d.out, d.opened)
		}
		b.ds.Tools = append(b.ds.Tools, d.tool())
	}
	slices.SortFunc(b.ds.Tools, func(x, y registry.Tool) int { return strings.Compare(x.Name, y.Name) })
	for _, paths := range b.ds.ExtraFields {
		sort.Strings(paths)
	}
}

// closeObjects marks every object schema with declared properties that the
// data did not open as allowing no other properties, so that a reference
// to an undeclared field is a field_not_found error.
func closeObjects(s *jsonschema.Schema, opened map[*jsonschema.Schema]bool) {
	if s == nil {
		return
	}
	if len(s.Properties) > 0 && s.AdditionalProperties == nil && !opened[s] {
		s.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
	}
	for _, p := range s.Properties {
		closeObjects(p, opened)
	}
	closeObjects(s.Items, opened)
}
