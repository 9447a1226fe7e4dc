package schemaload

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orchestra-mcp/orchestra/internal/boundedmap"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
)

// Limits bound a schema from outside.
type Limits struct {
	// JSON bounds the schema's JSON: its bytes, nesting and values.
	JSON jsongate.Limits
	// FanOut caps how many schemas apply to one value at once: a schema
	// and what its $ref, allOf, anyOf, oneOf, not, if/then/else and
	// dependentSchemas reach, counted as often as they are reached.
	FanOut int
	// Expanded caps the schemas a walk visits when it follows every $ref
	// (stopping where a reference leads back into a schema it is inside),
	// as the planner does when it inlines a tool's schema.
	Expanded int
}

// Defaults of a schema from outside. Real tool schemas hold a few hundred
// sub-schemas at most; the limits are two orders of magnitude above.
const (
	DefaultBytes    = 1 << 20
	DefaultDepth    = 128
	DefaultElements = 100_000
	DefaultFanOut   = 1000
	DefaultExpanded = 20_000
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{
		JSON:     jsongate.Limits{Bytes: DefaultBytes, Depth: DefaultDepth, Elements: DefaultElements},
		FanOut:   DefaultFanOut,
		Expanded: DefaultExpanded,
	}
}

// Error says why a schema from outside was refused.
type Error struct {
	// Source names where the schema came from: "client tool \"x\"
	// input_schema", "server \"fs\" tool \"read\" output schema".
	Source string
	// At is the JSON pointer of the sub-schema at fault, "#" for the root,
	// or empty when the whole schema is.
	At string
	// Reason says what is wrong and how to fix it.
	Reason string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	if e.At != "" {
		b.WriteString("at ")
		b.WriteString(e.At)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Load reads a schema from outside: raw is its JSON (json.RawMessage or
// []byte) or the decoded value (a map, a boolean). The schema is refused,
// with an *[Error] naming source, when its JSON passes lim.JSON, when a
// $ref points outside it or at nothing, when it refers to itself without
// descending into a value (the cycles that send a validator into endless
// recursion), or when it passes lim.FanOut or lim.Expanded. A loaded
// schema is resolved once here; validating values against it goes
// through [CheckValue] first. nil raw yields nil.
//
// Nested $id keywords are dropped: references resolve within the document
// as a whole, as every walk of the schema assumes.
func Load(source string, raw any, lim Limits) (*jsonschema.Schema, error) {
	if raw == nil {
		return nil, nil
	}
	data, err := Encode(raw)
	if err != nil {
		return nil, &Error{Source: source, Reason: fmt.Sprintf("does not encode as JSON: %v", err)}
	}
	if err := lim.JSON.Check(data); err != nil {
		return nil, &Error{Source: source, Reason: fmt.Sprintf("the schema %v; send a smaller schema", err)}
	}
	s := &jsonschema.Schema{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, &Error{Source: source, Reason: fmt.Sprintf("not a JSON Schema: %v", err)}
	}
	g := newGraph(source, s)
	for _, n := range g.order {
		n.ID = ""
	}
	if err := check(g, lim); err != nil {
		return nil, err
	}
	return s, nil
}

// Encode returns a schema as JSON: the bytes of a json.RawMessage or a
// []byte as they are, any other value (a map, a struct) marshaled.
func Encode(raw any) ([]byte, error) {
	switch r := raw.(type) {
	case json.RawMessage:
		return r, nil
	case []byte:
		return r, nil
	}
	return json.Marshal(raw)
}

// Check applies Load's checks to a schema built in memory (one a repair
// step produced from a schema from outside). It changes nothing.
func Check(source string, s *jsonschema.Schema, lim Limits) error {
	if s == nil {
		return nil
	}
	g := newGraph(source, s)
	if n := lim.JSON.Elements; n > 0 && len(g.order) > n {
		return &Error{Source: source, Reason: fmt.Sprintf("the schema holds %d sub-schemas, more than the limit of %d; send a smaller schema", len(g.order), n)}
	}
	return check(g, lim)
}

func check(g *graph, lim Limits) error {
	if g.refErr != nil {
		return g.refErr
	}
	if cycle := g.inPlaceCycle(); cycle != nil {
		names := make([]string, len(cycle))
		for i, s := range cycle {
			names[i] = g.path[s]
		}
		return &Error{Source: g.source, At: names[0], Reason: fmt.Sprintf("the schema refers to itself without descending into a value (%s), so no value could ever be checked against it; a schema may refer to itself only inside properties, items or their kin", strings.Join(names, " → "))}
	}
	if lim.FanOut > 0 {
		fan := g.fanOut(lim.FanOut)
		for _, s := range g.order {
			if fan[s] > lim.FanOut {
				return &Error{Source: g.source, At: g.path[s], Reason: fmt.Sprintf("checking one value applies more than %d schemas at once (its $ref, allOf, anyOf and oneOf reach the same schemas over and over); simplify the schema", lim.FanOut)}
			}
		}
	}
	if lim.Expanded > 0 {
		if n := g.expanded(lim.Expanded); n > lim.Expanded {
			return &Error{Source: g.source, Reason: fmt.Sprintf("the schema expands to more than %d sub-schemas when its $refs are followed; define shared parts once and reference them less often", lim.Expanded)}
		}
	}
	if _, err := g.root.Resolve(nil); err != nil {
		return &Error{Source: g.source, Reason: fmt.Sprintf("the schema does not resolve: %v", err)}
	}
	graphs.Put(g.root, g)
	return nil
}

// graphs keeps the graphs of the schemas loaded, for CheckValue. Schemas
// do not change once loaded; a cache past its bound starts over, and a
// schema not in it has its graph built again.
var graphs boundedmap.Map[*jsonschema.Schema, *graph]

func graphOf(root *jsonschema.Schema) *graph {
	if g, ok := graphs.Get(root); ok {
		return g
	}
	return graphs.Put(root, newGraph("", root))
}

// Deref resolves a reference within root ("#", "#/$defs/a", "#anchor") to
// the sub-schema itself, or nil.
func Deref(root *jsonschema.Schema, ref string) *jsonschema.Schema {
	if root == nil {
		return nil
	}
	if strings.HasPrefix(ref, "#/") {
		s, _ := pointer(root, ref[1:])
		return s
	}
	s, _ := graphOf(root).deref(ref)
	return s
}

// AsError returns the loader's error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
