package schemas

import (
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/orchestra-mcp/orchestra/internal/boundedmap"
	"github.com/orchestra-mcp/orchestra/internal/schemaload"
)

type resolvedKey struct{ root, s *jsonschema.Schema }

type resolvedEntry struct {
	rs  *jsonschema.Resolved
	err error
}

var resolvedCache boundedmap.Map[resolvedKey, resolvedEntry]

// Resolve resolves s for validation, caching the result. Schemas must not be
// changed after they are resolved.
func Resolve(s *jsonschema.Schema) (*jsonschema.Resolved, error) {
	return resolve(resolvedKey{s, s}, func() *jsonschema.Schema { return s })
}

func resolve(k resolvedKey, build func() *jsonschema.Schema) (*jsonschema.Resolved, error) {
	if e, ok := resolvedCache.Get(k); ok {
		return e.rs, e.err
	}
	rs, err := build().Resolve(nil)
	e := resolvedCache.Put(k, resolvedEntry{rs, err})
	return e.rs, e.err
}

// ValidateValue validates v against s, within the validation budget
// (schemaload.CheckValue): a value that would take the validator longer is
// refused with an error saying so.
func ValidateValue(s *jsonschema.Schema, v any) error {
	rs, err := Resolve(s)
	if err != nil {
		return err
	}
	if err := schemaload.CheckValue(s, s, v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// Validate validates v against the single schema at n, within the
// validation budget as ValidateValue. It reports ok=false when n cannot be
// checked on its own (it is open, a union, or its schema does not
// resolve); the error is then nil.
func (n Node) Validate(v any) (err error, ok bool) {
	if n.Open || len(n.cands) != 1 {
		return nil, false
	}
	c := n.cands[0]
	rs, rerr := resolve(resolvedKey{c.root, c.s}, n.Sub)
	if rerr != nil {
		return nil, false
	}
	if err := schemaload.CheckValue(c.root, c.s, v); err != nil {
		return err, true
	}
	return rs.Validate(v), true
}

var validatingPrefix = regexp.MustCompile(`validating ([^:]*): `)

// CleanError turns a jsonschema-go validation error into a short message
// that names the failing location in the schema.
func CleanError(err error) string {
	msg := err.Error()
	locs := validatingPrefix.FindAllStringSubmatchIndex(msg, -1)
	if len(locs) == 0 {
		return msg
	}
	last := locs[len(locs)-1]
	loc := msg[last[2]:last[3]]
	rest := msg[last[1]:]
	if loc == "root" || loc == "" {
		return rest
	}
	if strings.HasPrefix(loc, "/properties/") {
		parts := strings.Split(strings.TrimPrefix(loc, "/"), "/")
		var names []string
		plain := true
		for i := 0; i < len(parts); i += 2 {
			if parts[i] != "properties" || i+1 >= len(parts) {
				plain = false
				break
			}
			names = append(names, parts[i+1])
		}
		if plain {
			return strings.Join(names, ".") + ": " + rest
		}
	}
	return loc + ": " + rest
}
