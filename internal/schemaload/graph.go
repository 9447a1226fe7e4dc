package schemaload

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// graph is a schema seen as a graph: each sub-schema is a node; an
// in-place edge leads to a schema that applies to the same value ($ref,
// allOf, anyOf, oneOf, not, if/then/else, dependentSchemas), a value edge
// to one that applies to a part of it (properties, items and their kin).
type graph struct {
	source string
	root   *jsonschema.Schema
	// path is each node's JSON pointer, for messages.
	path map[*jsonschema.Schema]string
	// order lists the nodes as the tree walk met them.
	order []*jsonschema.Schema
	// inPlace are the in-place edges of each node.
	inPlace map[*jsonschema.Schema][]*jsonschema.Schema
	// refs are the targets of each node's $ref and $dynamicRef.
	refs map[*jsonschema.Schema][]*jsonschema.Schema
	// kids are the children of each node that apply to parts of its value.
	kids map[*jsonschema.Schema][]child
	// cyclic is set when the in-place edges have a cycle (only a schema
	// built in memory, never a loaded one).
	cyclic bool
	// size bounds the schemas that apply to one value, for a schema that
	// is not recursive (see unrolled); 0 for a recursive one.
	size uint64
	// anchors are the schemas by $anchor and $dynamicAnchor.
	anchors, dynamic map[string][]*jsonschema.Schema
	// refErr is the first reference that does not resolve.
	refErr *Error
}

// child is a sub-schema reached from its parent by a keyword.
type child struct {
	key  string // the pointer segments from the parent: "properties/a", "items"
	s    *jsonschema.Schema
	part part   // what part of the parent's value the child applies to
	name string // the property, for partProperty
	idx  int    // the element, for partElement
}

// part says what part of a value a sub-schema applies to.
type part int

const (
	partSame       part = iota // the value itself (allOf, $ref's kin)
	partNone                   // none: a definition, a content schema
	partProperty               // the member named name (properties)
	partMember                 // any member (patternProperties, unevaluatedProperties)
	partAdditional             // a member properties does not name
	partName                   // the members' names (propertyNames)
	partElements               // every element (items, contains)
	partElement                // element idx (prefixItems, draft-07 tuple items)
)

// children lists the sub-schemas of s, in a stable order.
func children(s *jsonschema.Schema) []child {
	var out []child
	one := func(key string, c *jsonschema.Schema, p part) {
		if c != nil {
			out = append(out, child{key: key, s: c, part: p})
		}
	}
	named := func(key string, m map[string]*jsonschema.Schema, p part) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, child{key: key + "/" + escape(k), s: m[k], part: p, name: k})
		}
	}
	list := func(key string, l []*jsonschema.Schema, p part) {
		for i, c := range l {
			out = append(out, child{key: key + "/" + strconv.Itoa(i), s: c, part: p, idx: i})
		}
	}
	named("$defs", s.Defs, partNone)
	named("definitions", s.Definitions, partNone)
	list("allOf", s.AllOf, partSame)
	list("anyOf", s.AnyOf, partSame)
	list("oneOf", s.OneOf, partSame)
	one("not", s.Not, partSame)
	one("if", s.If, partSame)
	one("then", s.Then, partSame)
	one("else", s.Else, partSame)
	named("dependentSchemas", s.DependentSchemas, partSame)
	named("dependencies", s.DependencySchemas, partSame)
	named("properties", s.Properties, partProperty)
	named("patternProperties", s.PatternProperties, partMember)
	one("additionalProperties", s.AdditionalProperties, partAdditional)
	one("unevaluatedProperties", s.UnevaluatedProperties, partMember)
	one("propertyNames", s.PropertyNames, partName)
	list("prefixItems", s.PrefixItems, partElement)
	one("items", s.Items, partElements)
	list("items", s.ItemsArray, partElement)
	one("additionalItems", s.AdditionalItems, partElements)
	one("unevaluatedItems", s.UnevaluatedItems, partElements)
	one("contains", s.Contains, partElements)
	one("contentSchema", s.ContentSchema, partNone)
	return out
}

// escape writes a key as a JSON pointer segment.
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func unescape(seg string) string {
	return strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
}

// newGraph builds the graph of root. A schema met twice (a tree built in
// memory that shares a sub-schema) is a node once.
func newGraph(source string, root *jsonschema.Schema) *graph {
	g := &graph{
		source:  source,
		root:    root,
		path:    map[*jsonschema.Schema]string{},
		inPlace: map[*jsonschema.Schema][]*jsonschema.Schema{},
		refs:    map[*jsonschema.Schema][]*jsonschema.Schema{},
		kids:    map[*jsonschema.Schema][]child{},
		anchors: map[string][]*jsonschema.Schema{},
		dynamic: map[string][]*jsonschema.Schema{},
	}
	// An explicit stack: the tree's depth is the JSON's, which the gate
	// bounds, but a walk that cannot overflow needs no argument.
	type item struct {
		s    *jsonschema.Schema
		path string
	}
	stack := []item{{root, "#"}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, seen := g.path[it.s]; seen {
			continue
		}
		g.path[it.s] = it.path
		g.order = append(g.order, it.s)
		if it.s.Anchor != "" {
			g.anchors[it.s.Anchor] = append(g.anchors[it.s.Anchor], it.s)
		}
		if it.s.DynamicAnchor != "" {
			g.dynamic[it.s.DynamicAnchor] = append(g.dynamic[it.s.DynamicAnchor], it.s)
			g.anchors[it.s.DynamicAnchor] = append(g.anchors[it.s.DynamicAnchor], it.s)
		}
		cs := children(it.s)
		for i := len(cs) - 1; i >= 0; i-- {
			stack = append(stack, item{cs[i].s, it.path + "/" + cs[i].key})
		}
	}
	for _, s := range g.order {
		var edges []*jsonschema.Schema
		if s.Ref != "" {
			t, err := g.deref(s.Ref)
			if err != nil && g.refErr == nil {
				g.refErr = &Error{Source: source, At: g.path[s], Reason: fmt.Sprintf("$ref %q %s", s.Ref, err)}
			}
			if t != nil {
				edges = append(edges, t)
			}
		}
		if s.DynamicRef != "" {
			// Resolved at run time against the anchors in scope: any
			// schema with the anchor may be the target.
			name := s.DynamicRef[strings.IndexByte(s.DynamicRef, '#')+1:]
			if t, err := g.deref(s.DynamicRef); err == nil && t != nil {
				edges = append(edges, t)
			}
			edges = append(edges, g.dynamic[name]...)
		}
		if len(edges) > 0 {
			g.refs[s] = edges
		}
		edges = slices.Clone(edges)
		for _, c := range children(s) {
			switch c.part {
			case partSame:
				edges = append(edges, c.s)
			case partNone:
			default:
				g.kids[s] = append(g.kids[s], c)
			}
		}
		if len(edges) > 0 {
			g.inPlace[s] = edges
		}
	}
	if g.refErr == nil && g.inPlaceCycle() == nil {
		g.size = g.unrolled(BaseEvaluations)
	} else {
		g.cyclic = g.refErr == nil
	}
	return g
}

// deref resolves a reference within the document: "#", a JSON pointer
// ("#/$defs/a") or an anchor ("#name").
func (g *graph) deref(ref string) (*jsonschema.Schema, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("points outside the schema; only references within it (#, #/$defs/name, #anchor) are followed")
	}
	if frag == "" {
		return g.root, nil
	}
	if !strings.HasPrefix(frag, "/") {
		switch as := g.anchors[frag]; len(as) {
		case 0:
			return nil, fmt.Errorf("names no $anchor of the schema")
		case 1:
			return as[0], nil
		default:
			return nil, fmt.Errorf("names an $anchor the schema declares %d times", len(as))
		}
	}
	return pointer(g.root, frag)
}

// pointer follows a JSON pointer ("/properties/a/items") through s.
func pointer(s *jsonschema.Schema, ptr string) (*jsonschema.Schema, error) {
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i := 0; i < len(segs); i++ {
		if s == nil {
			break
		}
		key := unescape(segs[i])
		next := func() (string, bool) {
			if i+1 >= len(segs) {
				return "", false
			}
			i++
			return unescape(segs[i]), true
		}
		var found *jsonschema.Schema
		switch key {
		case "$defs", "definitions", "properties", "patternProperties", "dependentSchemas", "dependencies":
			name, ok := next()
			if !ok {
				return nil, fmt.Errorf("ends at %q, which is not a schema", key)
			}
			m := map[string]map[string]*jsonschema.Schema{
				"$defs": s.Defs, "definitions": s.Definitions, "properties": s.Properties,
				"patternProperties": s.PatternProperties, "dependentSchemas": s.DependentSchemas, "dependencies": s.DependencySchemas,
			}[key]
			found = m[name]
		case "allOf", "anyOf", "oneOf", "prefixItems":
			idx, ok := next()
			if !ok {
				return nil, fmt.Errorf("ends at %q, which is not a schema", key)
			}
			l := map[string][]*jsonschema.Schema{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf, "prefixItems": s.PrefixItems}[key]
			if n, err := strconv.Atoi(idx); err == nil && n >= 0 && n < len(l) {
				found = l[n]
			}
		case "items":
			if s.ItemsArray != nil {
				if idx, ok := next(); ok {
					if n, err := strconv.Atoi(idx); err == nil && n >= 0 && n < len(s.ItemsArray) {
						found = s.ItemsArray[n]
					}
				}
			} else {
				found = s.Items
			}
		default:
			found = map[string]*jsonschema.Schema{
				"not": s.Not, "if": s.If, "then": s.Then, "else": s.Else,
				"additionalProperties": s.AdditionalProperties, "unevaluatedProperties": s.UnevaluatedProperties,
				"propertyNames": s.PropertyNames, "additionalItems": s.AdditionalItems,
				"unevaluatedItems": s.UnevaluatedItems, "contains": s.Contains, "contentSchema": s.ContentSchema,
			}[key]
		}
		s = found
	}
	if s == nil {
		return nil, fmt.Errorf("points at nothing in the schema")
	}
	return s, nil
}

// inPlaceCycle returns a cycle of in-place edges reachable from the root,
// as the nodes along it, or nil. Such a cycle makes a validator apply a
// schema to the same value for ever.
func (g *graph) inPlaceCycle() []*jsonschema.Schema {
	const (
		white = iota
		grey
		black
	)
	color := map[*jsonschema.Schema]int{}
	type frame struct {
		s    *jsonschema.Schema
		next int
	}
	for _, start := range g.order {
		if color[start] != white {
			continue
		}
		stack := []frame{{start, 0}}
		color[start] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			edges := g.inPlace[top.s]
			if top.next == len(edges) {
				color[top.s] = black
				stack = stack[:len(stack)-1]
				continue
			}
			t := edges[top.next]
			top.next++
			switch color[t] {
			case grey:
				var cycle []*jsonschema.Schema
				for i := len(stack) - 1; i >= 0; i-- {
					cycle = append(cycle, stack[i].s)
					if stack[i].s == t {
						break
					}
				}
				slices.Reverse(cycle)
				return append(cycle, t)
			case white:
				color[t] = grey
				stack = append(stack, frame{t, 0})
			}
		}
	}
	return nil
}

// fanOut returns, for each node, how many schemas apply to a value that
// node applies to (itself and everything its in-place edges reach,
// counted as often as they are reached), saturating at limit+1. The
// in-place edges must have no cycle.
func (g *graph) fanOut(limit int) map[*jsonschema.Schema]int {
	memo := map[*jsonschema.Schema]int{}
	var count func(s *jsonschema.Schema) int
	count = func(s *jsonschema.Schema) int {
		if n, ok := memo[s]; ok {
			return n
		}
		n := 1
		for _, t := range g.inPlace[s] {
			n = min(n+count(t), limit+1)
		}
		memo[s] = n
		return n
	}
	for _, s := range g.order {
		count(s)
	}
	return memo
}

// expanded counts the schemas a walk from the root visits when it follows
// every $ref, stopping where a reference leads back into a schema it is
// already inside (recursion through values). It stops counting past limit.
func (g *graph) expanded(limit int) int {
	n := 0
	inside := map[*jsonschema.Schema]int{}
	var visit func(s *jsonschema.Schema)
	visit = func(s *jsonschema.Schema) {
		if n > limit {
			return
		}
		n++
		inside[s]++
		defer func() { inside[s]-- }()
		for _, t := range g.refs[s] {
			if inside[t] == 0 {
				visit(t)
			}
		}
		for _, c := range children(s) {
			if c.part != partNone {
				visit(c.s)
			}
		}
	}
	visit(g.root)
	return n
}

// unrolled returns the largest number of sub-schemas any node stands for
// once its references are followed (its tree, with each reference
// replaced by its target), or 0 when a reference leads back into itself
// (a recursive schema, which stands for trees of any size). It saturates
// at limit.
func (g *graph) unrolled(limit uint64) uint64 {
	const (
		white = iota
		grey
		black
	)
	color := map[*jsonschema.Schema]int{}
	size := map[*jsonschema.Schema]uint64{}
	recursive := false
	var visit func(s *jsonschema.Schema) uint64
	visit = func(s *jsonschema.Schema) uint64 {
		switch color[s] {
		case grey:
			recursive = true
			return 0
		case black:
			return size[s]
		}
		color[s] = grey
		n := uint64(1)
		for _, t := range g.refs[s] {
			n = min(sat(n, visit(t)), limit)
		}
		for _, c := range children(s) {
			if c.part != partNone {
				n = min(sat(n, visit(c.s)), limit)
			}
		}
		color[s] = black
		size[s] = n
		return n
	}
	var most uint64
	for _, s := range g.order {
		most = max(most, visit(s))
		if recursive {
			return 0
		}
	}
	return most
}
