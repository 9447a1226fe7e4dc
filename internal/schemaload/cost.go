package schemaload

import (
	"fmt"
	"math"

	"github.com/google/jsonschema-go/jsonschema"
)

// Validation budget: checking a value may apply BaseEvaluations schemas,
// plus PerValue for each value inside it. Every schema that passes Load
// checks ordinary values well within it; a schema that applies several of
// its parts to the same values at every level (allOf: [{properties: {x:
// $ref self}}, {properties: {x: $ref self}}]) would take time exponential
// in the value's depth, and is stopped at the budget instead.
const (
	BaseEvaluations = 200_000
	PerValue        = 2
)

// CheckValue reports whether checking v against the sub-schema at of
// root stays within the validation budget, before a validator spends the
// time: it counts, value by value, the schemas a validator applies there,
// without applying them. at may be root itself.
func CheckValue(root, at *jsonschema.Schema, v any) error {
	if root == nil || at == nil {
		return nil
	}
	g := graphOf(root)
	if _, ok := g.path[at]; !ok {
		g = graphOf(at)
	}
	what := "the schema"
	if g.source != "" {
		what = g.source
	}
	if g.cyclic {
		return fmt.Errorf("%s refers to itself without descending into a value: no value can be checked against it", what)
	}
	if g.size > 0 && countValues(v, BaseEvaluations/g.size) <= BaseEvaluations/g.size {
		// No schema recursion: at most g.size schemas apply to each
		// value, and there are few enough values.
		return nil
	}
	c := &coster{g: g, budget: BaseEvaluations}
	c.value(v, &states{list: []state{{at, 1}}})
	if c.over {
		return fmt.Errorf("checking the value against %s would apply more than %d schemas: the schema applies its parts to the same values several times at every level; simplify the schema or send a smaller value", what, c.budget)
	}
	return nil
}

// state is a schema applied to a value, and how many times.
type state struct {
	s *jsonschema.Schema
	n uint64
}

// states is a set of states, each schema once.
type states struct {
	list []state
	idx  map[*jsonschema.Schema]int // indexes list once it is long
}

func (ss *states) add(s *jsonschema.Schema, n uint64) {
	if ss.idx != nil {
		if i, ok := ss.idx[s]; ok {
			ss.list[i].n = sat(ss.list[i].n, n)
			return
		}
	} else {
		for i := range ss.list {
			if ss.list[i].s == s {
				ss.list[i].n = sat(ss.list[i].n, n)
				return
			}
		}
	}
	ss.list = append(ss.list, state{s, n})
	switch {
	case ss.idx != nil:
		ss.idx[s] = len(ss.list) - 1
	case len(ss.list) > 16:
		ss.idx = make(map[*jsonschema.Schema]int, 2*len(ss.list))
		for i, st := range ss.list {
			ss.idx[st.s] = i
		}
	}
}

// coster counts evaluations against a budget.
type coster struct {
	g      *graph
	budget uint64
	spent  uint64
	over   bool
}

// value counts the evaluations of v, which in states apply to, and of
// everything inside v.
func (c *coster) value(v any, in *states) {
	c.budget += PerValue
	all := &states{}
	for _, st := range in.list {
		if c.apply(st.s, st.n, all); c.over {
			return
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			next, names := &states{}, &states{}
			for _, st := range all.list {
				_, named := st.s.Properties[k]
				for _, ch := range c.g.kids[st.s] {
					switch {
					case ch.part == partProperty && ch.name == k,
						ch.part == partMember,
						ch.part == partAdditional && !named:
						next.add(ch.s, st.n)
					case ch.part == partName:
						names.add(ch.s, st.n)
					}
				}
			}
			if len(names.list) > 0 {
				c.value(k, names)
			}
			if len(next.list) > 0 {
				c.value(e, next)
			}
			if c.over {
				return
			}
		}
	case []any:
		for i, e := range v {
			next := &states{}
			for _, st := range all.list {
				for _, ch := range c.g.kids[st.s] {
					if ch.part == partElements || ch.part == partElement && ch.idx == i {
						next.add(ch.s, st.n)
					}
				}
			}
			if len(next.list) > 0 {
				c.value(e, next)
			}
			if c.over {
				return
			}
		}
	}
}

// apply counts n applications of s and of what s applies in place, and
// adds each schema applied to all.
func (c *coster) apply(s *jsonschema.Schema, n uint64, all *states) {
	c.spent = sat(c.spent, n)
	if c.spent > c.budget {
		c.over = true
		return
	}
	all.add(s, n)
	for _, t := range c.g.inPlace[s] {
		if c.apply(t, n, all); c.over {
			return
		}
	}
}

// sat adds without overflowing.
func sat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// countValues counts v and the values inside it, stopping past limit.
func countValues(v any, limit uint64) uint64 {
	n := uint64(1)
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if n > limit {
				break
			}
			n += countValues(e, limit-n)
		}
	case []any:
		for _, e := range v {
			if n > limit {
				break
			}
			n += countValues(e, limit-n)
		}
	}
	return n
}
