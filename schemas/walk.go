package schemas

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/internal/boundedmap"
	"github.com/orchestra-mcp/orchestra/internal/schemaload"
)

// Seg is one step of a path: a key or an index.
type Seg struct {
	Key     string
	Index   int
	IsIndex bool
}

// located is a schema together with the root its $refs resolve against.
type located struct {
	s    *jsonschema.Schema
	root *jsonschema.Schema
}

// Node is where a walk arrived: the schemas the value there must satisfy
// (any of them, when a union was crossed). A Node with no schemas is open:
// nothing is known about the value.
type Node struct {
	cands []located
	// Open reports that the walk passed through a schema that allows
	// anything at this point, so nothing can be checked.
	Open bool
}

// At returns the node of root itself.
func At(root *jsonschema.Schema) Node {
	if root == nil {
		return Node{Open: true}
	}
	if n, ok := atCache.Get(root); ok {
		return n
	}
	return atCache.Put(root, Node{cands: []located{{root, root}}})
}

// Walking the same schema along the same segment always arrives at the same
// node, and schemas do not change once in use (as for Resolve), so the nodes
// of single schemas are kept: validating a plan then allocates little for
// the schemas it has walked before. The caches grow with the schemas and
// paths in use, which a catalog bounds; as schemas are replaced (a
// downstream server restarts), a cache past boundedmap.DefaultMax entries starts over.
var (
	atCache    boundedmap.Map[*jsonschema.Schema, Node]
	stepCache  boundedmap.Map[stepKey, stepResult]
	propsCache boundedmap.Map[stepKey, propsResult]
)

type stepKey struct {
	s, root *jsonschema.Schema
	seg     Seg
}

type stepResult struct {
	n   Node
	err *WalkError
}

// Schemas returns the schemas of the node.
func (n Node) Schemas() []*jsonschema.Schema {
	out := make([]*jsonschema.Schema, 0, len(n.cands))
	for _, c := range n.cands {
		out = append(out, c.s)
	}
	return out
}

// WalkError says why a walk failed.
type WalkError struct {
	// At is the index of the segment that failed.
	At int
	// Reason says what is wrong.
	Reason string
	// Available lists the fields that exist where a field was missing.
	Available []string
}

func (e *WalkError) Error() string { return e.Reason }

// Walk follows path from root.
func Walk(root *jsonschema.Schema, path []Seg) (Node, error) {
	return At(root).Walk(path)
}

// Walk follows path from n.
func (n Node) Walk(path []Seg) (Node, error) {
	for i, seg := range path {
		next, err := n.step(seg)
		if err != nil {
			err.At = i
			return Node{}, err
		}
		n = next
		if n.Open {
			return n, nil
		}
	}
	return n, nil
}

// Union returns a node whose value satisfies any of nodes.
func Union(nodes ...Node) Node {
	var out Node
	for _, n := range nodes {
		if n.Open {
			return Node{Open: true}
		}
		out.cands = append(out.cands, n.cands...)
	}
	return out
}

// flatten resolves $ref and expands allOf/anyOf/oneOf, so that every
// schema a value at this point may be checked against is listed.
func (n Node) flatten() []located {
	if len(n.cands) == 1 && n.cands[0].s != nil && !isComposite(n.cands[0].s) {
		return n.cands // nothing to resolve or expand; callers only read it
	}
	// out holds each schema once; a map indexes it when it grows long.
	out := make([]located, 0, 4)
	var seen map[*jsonschema.Schema]bool
	has := func(s *jsonschema.Schema) bool {
		if seen != nil {
			return seen[s]
		}
		for _, c := range out {
			if c.s == s {
				return true
			}
		}
		return false
	}
	var add func(c located, depth int)
	add = func(c located, depth int) {
		if c.s == nil || depth > 32 || has(c.s) {
			return
		}
		out = append(out, c)
		switch {
		case seen != nil:
			seen[c.s] = true
		case len(out) > 16:
			seen = make(map[*jsonschema.Schema]bool, 2*len(out))
			for _, o := range out {
				seen[o.s] = true
			}
		}
		if c.s.Ref != "" {
			if t := deref(c.root, c.s.Ref); t != nil {
				add(located{t, c.root}, depth+1)
			}
		}
		for _, group := range [][]*jsonschema.Schema{c.s.AllOf, c.s.AnyOf, c.s.OneOf} {
			for _, b := range group {
				add(located{b, c.root}, depth+1)
			}
		}
	}
	for _, c := range n.cands {
		add(c, 0)
	}
	return out
}

// isComposite reports whether s only combines or points at other schemas.
func isComposite(s *jsonschema.Schema) bool {
	return s.Ref != "" || len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0
}

// structural reports whether s constrains what a value at this point is,
// beyond annotations.
func structural(s *jsonschema.Schema) bool {
	return s.Type != "" || len(s.Types) > 0 || s.Properties != nil || s.PatternProperties != nil ||
		s.AdditionalProperties != nil || s.Items != nil || s.ItemsArray != nil || s.PrefixItems != nil ||
		s.Enum != nil || s.Const != nil || isComposite(s) || s.Not != nil
}

func (n Node) step(seg Seg) (Node, *WalkError) {
	if n.Open {
		return n, nil
	}
	if len(n.cands) != 1 {
		return n.walkStep(seg)
	}
	k := stepKey{n.cands[0].s, n.cands[0].root, seg}
	r, ok := stepCache.Get(k)
	if !ok {
		next, err := n.walkStep(seg)
		r = stepCache.Put(k, stepResult{next, err})
	}
	if r.err != nil {
		e := *r.err // callers annotate their copy
		return Node{}, &e
	}
	return r.n, nil
}

// walkStep follows one segment from n.
func (n Node) walkStep(seg Seg) (Node, *WalkError) {
	flat := n.flatten()
	var next Node
	found, open := false, false
	var available []string
	var kinds, tuples []string
	for _, c := range flat {
		s := c.s
		if !structural(s) || isFalse(s) {
			if !structural(s) && !isComposite(s) && len(flat) == 1 {
				open = true
			}
			continue
		}
		if isComposite(s) && !hasOwnShape(s) {
			continue
		}
		types := ownTypes(s)
		if seg.IsIndex {
			if types != nil && !slices.Contains(types, "array") {
				kinds = append(kinds, strings.Join(types, " or "))
				continue
			}
			switch {
			case seg.Index < len(s.PrefixItems):
				next.cands = append(next.cands, located{s.PrefixItems[seg.Index], c.root})
				found = true
			case seg.Index < len(s.ItemsArray):
				next.cands = append(next.cands, located{s.ItemsArray[seg.Index], c.root})
				found = true
			case s.Items != nil && s.PrefixItems == nil:
				next.cands = append(next.cands, located{s.Items, c.root})
				found = true
			case s.ItemsArray != nil && s.AdditionalItems != nil && !isFalse(s.AdditionalItems):
				next.cands = append(next.cands, located{s.AdditionalItems, c.root})
				found = true
			case s.PrefixItems != nil && s.Items != nil && !isFalse(s.Items):
				next.cands = append(next.cands, located{s.Items, c.root})
				found = true
			case s.ItemsArray != nil && s.AdditionalItems == nil || s.PrefixItems != nil && s.Items == nil:
				open = true // items past the tuple may be anything
			case s.ItemsArray == nil && s.PrefixItems == nil:
				open = true
			default:
				tuples = append(tuples, fmt.Sprintf("an array of %d items", max(len(s.PrefixItems), len(s.ItemsArray))))
			}
			continue
		}
		if types != nil && !slices.Contains(types, "object") {
			kinds = append(kinds, strings.Join(types, " or "))
			continue
		}
		if p, ok := s.Properties[seg.Key]; ok {
			next.cands = append(next.cands, located{p, c.root})
			found = true
			continue
		}
		matched := false
		for pat, p := range s.PatternProperties {
			if re, err := compilePattern(pat); err == nil && re.MatchString(seg.Key) {
				next.cands = append(next.cands, located{p, c.root})
				found, matched = true, true
			}
		}
		if matched {
			continue
		}
		for k := range s.Properties {
			available = append(available, k)
		}
		switch ap := s.AdditionalProperties; {
		case ap == nil && s.Properties == nil && s.PatternProperties == nil:
			open = true
		case ap != nil && !isFalse(ap) && structural(ap):
			next.cands = append(next.cands, located{ap, c.root})
			found = true
		case ap != nil && !isFalse(ap):
			open = true
		}
	}
	if found {
		return next, nil
	}
	if open {
		return Node{Open: true}, nil
	}
	slices.Sort(available)
	available = slices.Compact(available)
	if seg.IsIndex {
		what := "not an array"
		switch {
		case len(kinds) > 0:
			what = "of type " + strings.Join(slices.Compact(kinds), ", ")
		case len(tuples) > 0:
			what = strings.Join(slices.Compact(tuples), " or ")
		}
		return Node{}, &WalkError{Reason: fmt.Sprintf("cannot index with [%d]: the value is %s", seg.Index, what)}
	}
	if len(kinds) > 0 && len(available) == 0 {
		return Node{}, &WalkError{Reason: fmt.Sprintf("cannot read field %q: the value is of type %s, not an object", seg.Key, strings.Join(slices.Compact(kinds), ", "))}
	}
	return Node{}, &WalkError{Reason: fmt.Sprintf("field %q does not exist", seg.Key), Available: available}
}

// hasOwnShape reports whether a composite schema also declares a shape of
// its own next to its allOf/anyOf/oneOf/$ref.
func hasOwnShape(s *jsonschema.Schema) bool {
	return s.Properties != nil || s.PatternProperties != nil || s.AdditionalProperties != nil ||
		s.Items != nil || s.ItemsArray != nil || s.PrefixItems != nil
}

func isFalse(s *jsonschema.Schema) bool {
	return s != nil && s.Not != nil && !structural(s.Not) && !isComposite(s.Not) && s.Type == "" && s.Types == nil && s.Properties == nil
}

// singleTypes are the one-element type lists of the JSON types, shared so
// that ownTypes need not allocate them. Their users only read them.
var singleTypes = map[string][]string{
	"string": {"string"}, "number": {"number"}, "integer": {"integer"}, "boolean": {"boolean"},
	"object": {"object"}, "array": {"array"}, "null": {"null"},
}

// ownTypes returns the types s declares itself, or nil. The result must not
// be changed.
func ownTypes(s *jsonschema.Schema) []string {
	switch {
	case s.Type != "":
		if ts, ok := singleTypes[s.Type]; ok {
			return ts
		}
		return []string{s.Type}
	case len(s.Types) > 0:
		return s.Types
	case s.Const != nil:
		return []string{valueType(*s.Const)}
	case s.Enum != nil:
		var ts []string
		for _, v := range s.Enum {
			ts = append(ts, valueType(v))
		}
		slices.Sort(ts)
		return slices.Compact(ts)
	}
	return nil
}

// Types returns the JSON types ("string", "number", "integer", "boolean",
// "object", "array", "null") a value at n may have, sorted, or nil when any
// type may do.
func (n Node) Types() []string {
	if n.Open || len(n.cands) == 0 {
		return nil
	}
	if len(n.cands) == 1 {
		// typesOf sorts and compacts; an empty list means any type, as
		// the union below makes it.
		switch ts := typesOf(n.cands[0], 0); len(ts) {
		case 0:
			return nil
		case 1:
			return ts // shared: callers only read it
		default:
			return slices.Clone(ts)
		}
	}
	var union []string
	for _, c := range n.cands {
		ts := typesOf(c, 0)
		if ts == nil {
			return nil
		}
		union = append(union, ts...)
	}
	slices.Sort(union)
	return slices.Compact(union)
}

// typesOf works out the types of one schema: its own, narrowed by allOf and
// $ref, widened by anyOf/oneOf.
func typesOf(c located, depth int) []string {
	s := c.s
	if s == nil || depth > 32 {
		return nil
	}
	ts := ownTypes(s)
	narrow := func(other []string) {
		if other == nil {
			return
		}
		if ts == nil {
			ts = other
			return
		}
		ts = intersect(ts, other)
	}
	if s.Ref != "" {
		if t := deref(c.root, s.Ref); t != nil {
			narrow(typesOf(located{t, c.root}, depth+1))
		}
	}
	for _, b := range s.AllOf {
		narrow(typesOf(located{b, c.root}, depth+1))
	}
	for _, group := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		if len(group) == 0 {
			continue
		}
		var u []string
		anyType := false
		for _, b := range group {
			bt := typesOf(located{b, c.root}, depth+1)
			if bt == nil {
				anyType = true
				break
			}
			u = append(u, bt...)
		}
		if !anyType {
			slices.Sort(u)
			narrow(slices.Compact(u))
		}
	}
	if ts != nil {
		slices.Sort(ts)
		ts = slices.Compact(ts)
	}
	return ts
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		switch {
		case slices.Contains(b, x):
			out = append(out, x)
		case x == "number" && slices.Contains(b, "integer"):
			out = append(out, "integer")
		case x == "integer" && slices.Contains(b, "number"):
			out = append(out, "integer")
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// Compatible reports whether a value of one of the types from may be used
// where one of the types to is expected. nil means any type. integer and
// number are interchangeable: whether a number is whole is known only at
// run time.
func Compatible(from, to []string) bool {
	if from == nil || to == nil {
		return true
	}
	for _, f := range from {
		for _, t := range to {
			if f == t || isNumeric(f) && isNumeric(t) {
				return true
			}
		}
	}
	return false
}

func isNumeric(t string) bool { return t == "number" || t == "integer" }

// ValueType returns the JSON Schema type of a decoded JSON value: whole
// numbers are "integer"; a value JSON does not decode to is "".
func ValueType(v any) string { return valueType(v) }

// TypeName names the JSON type of a decoded value for a message: "string",
// "number" (whole or not), "boolean", "array", "object" or "null"; a value
// JSON does not decode to is named by its Go type.
func TypeName(v any) string {
	if _, ok := v.(*big.Int); ok { // a jq program's large integers
		return "number"
	}
	switch t := valueType(v); t {
	case "integer":
		return "number"
	case "":
		return fmt.Sprintf("%T", v)
	default:
		return t
	}
}

// TypePhrase is [TypeName] with its article, for a message: "a string",
// "an object", "null".
func TypePhrase(v any) string {
	switch t := TypeName(v); {
	case t == "null":
		return t
	case strings.ContainsRune("aeiou", rune(t[0])):
		return "an " + t
	default:
		return "a " + t
	}
}

func valueType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case float32, json.Number:
		return "number"
	case int, int32, int64, uint, uint32, uint64:
		return "integer"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// deref resolves ref within root: "#", "#/$defs/x", "#/definitions/x",
// an anchor or any JSON pointer into root, to the sub-schema itself (so
// that the caches keyed by schema see one schema once). It returns nil
// when it cannot.
func deref(root *jsonschema.Schema, ref string) *jsonschema.Schema {
	return schemaload.Deref(root, ref)
}

type compiled struct {
	re  *regexp.Regexp
	err error
}

// patterns keeps the compiled patternProperties keys, bounded like the
// other caches: patterns come from the schemas of downstream servers.
var patterns boundedmap.Map[string, compiled]

func compilePattern(p string) (*regexp.Regexp, error) {
	c, ok := patterns.Get(p)
	if !ok {
		re, err := regexp.Compile(p)
		c = patterns.Put(p, compiled{re, err})
	}
	return c.re, c.err
}

// Required returns the property names the object schemas at n require,
// collected from the schemas themselves, their $refs and allOf branches
// (what every valid value must have).
func (n Node) Required() []string {
	var req []string
	var visit func(c located, depth int)
	visit = func(c located, depth int) {
		if c.s == nil || depth > 32 {
			return
		}
		req = append(req, c.s.Required...)
		if c.s.Ref != "" {
			if t := deref(c.root, c.s.Ref); t != nil {
				visit(located{t, c.root}, depth+1)
			}
		}
		for _, b := range c.s.AllOf {
			visit(located{b, c.root}, depth+1)
		}
	}
	if len(n.cands) == 1 {
		visit(n.cands[0], 0)
	}
	slices.Sort(req)
	return slices.Compact(req)
}

// Properties returns the property names declared at n, and whether the
// object is closed (no other property may appear).
// The names are shared between callers: do not change them.
func (n Node) Properties() (names []string, closed bool) {
	if n.Open || len(n.cands) == 0 {
		return nil, false
	}
	if len(n.cands) != 1 {
		return n.properties()
	}
	k := stepKey{s: n.cands[0].s, root: n.cands[0].root}
	r, ok := propsCache.Get(k)
	if !ok {
		names, closed := n.properties()
		r = propsCache.Put(k, propsResult{names, closed})
	}
	return r.names, r.closed
}

type propsResult struct {
	names  []string
	closed bool
}

func (n Node) properties() (names []string, closed bool) {
	closed, shaped := true, false
	for _, c := range n.flatten() {
		for k := range c.s.Properties {
			names = append(names, k)
		}
		if isComposite(c.s) && !hasOwnShape(c.s) {
			continue
		}
		shaped = true
		if c.s.AdditionalProperties == nil || !isFalse(c.s.AdditionalProperties) || c.s.PatternProperties != nil {
			closed = false
		}
	}
	slices.Sort(names)
	return slices.Compact(names), closed && shaped
}

// Sub returns a standalone schema for the single schema at n, carrying the
// root's $defs and definitions so that its $refs still resolve. It returns
// nil when n is open or a union.
func (n Node) Sub() *jsonschema.Schema {
	if len(n.cands) != 1 {
		return nil
	}
	c := n.cands[0]
	if c.s == c.root {
		return c.s
	}
	cp := *c.s
	if cp.Defs == nil {
		cp.Defs = c.root.Defs
	}
	if cp.Definitions == nil {
		cp.Definitions = c.root.Definitions
	}
	return &cp
}
