package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/bytesize"
	"github.com/orchestra-mcp/orchestra/internal/jsongate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// argError is a problem with a tool's arguments: the model can fix it, so it
// becomes a tool-error result.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func argErrorf(format string, a ...any) error { return &argError{fmt.Sprintf(format, a...)} }

// checkKeys reports an argument not in allowed.
func checkKeys(tool string, args map[string]any, allowed ...string) error {
	for k := range args {
		if !slices.Contains(allowed, k) {
			return argErrorf("%s: unknown argument %q; the arguments are %s", tool, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// stringArg returns the string argument key; a missing or null argument is
// "" and ok false.
func stringArg(tool string, args map[string]any, key string) (s string, ok bool, err error) {
	v, present := args[key]
	if !present || v == nil {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, argErrorf("%s: argument %q must be a string, not %s", tool, key, schemas.TypePhrase(v))
	}
	return s, true, nil
}

// objectArg returns the object argument key, nil if it is missing or null.
func objectArg(tool string, args map[string]any, key string) (map[string]any, error) {
	v, present := args[key]
	if !present || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, argErrorf("%s: argument %q must be an object, not %s", tool, key, schemas.TypePhrase(v))
	}
	return m, nil
}

// intArg returns the integer argument key. JSON numbers arrive as float64 or
// json.Number (or as Go integers from Go callers).
func intArg(tool string, args map[string]any, key string) (n int64, ok bool, err error) {
	v, present := args[key]
	if !present || v == nil {
		return 0, false, nil
	}
	n, ok = toInt64(v)
	if !ok {
		return 0, false, argErrorf("%s: argument %q must be an integer, not %s", tool, key, describe(v))
	}
	return n, true, nil
}

func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, false
		}
		return int64(v), true
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, true
		}
		if f, err := v.Float64(); err == nil {
			return toInt64(f)
		}
	}
	return 0, false
}

// describe names v's type and, for short scalars, the value.
func describe(v any) string {
	switch v := v.(type) {
	case float64, json.Number, int, int64:
		return fmt.Sprintf("the number %v", v)
	case string:
		if len(v) <= 40 {
			return fmt.Sprintf("the string %q", v)
		}
	}
	return schemas.TypePhrase(v)
}

// normalizeJSON converts a decoded JSON value (or a plain Go value built by a
// caller) to the types gojq and the plan engine work with: nil, bool, int,
// float64, json.Number, string, []any and map[string]any.
func normalizeJSON(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, string, int, float64:
		return v, nil
	case json.Number:
		if n, err := v.Int64(); err == nil && n >= math.MinInt && n <= math.MaxInt {
			return int(n), nil
		}
		if f, err := v.Float64(); err == nil && !math.IsInf(f, 0) {
			if _, ok := new(big.Int).SetString(v.String(), 10); !ok {
				return f, nil
			}
		}
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			n, err := normalizeJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			n, err := normalizeJSON(e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	// Anything else (typed slices, structs, int64...) goes through JSON.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value of type %T is not JSON: %w", v, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return normalizeJSON(out)
}

// decodeJSON decodes data into v with numbers as json.Number, once it has
// passed the decoding gate's default nesting and value limits: a worker's
// output or a fetched body may nest deeper than clients parse.
func decodeJSON(data []byte, v any) error {
	if err := jsongate.Default(0).Check(data); err != nil {
		return fmt.Errorf("the JSON %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// jsonResult returns a result whose structured content is out, with out as
// JSON in its text content.
func jsonResult(out map[string]any) *registry.Result {
	text := fmt.Sprint(out)
	if b, err := json.Marshal(out); err == nil {
		text = string(b)
	}
	return textResult(out, text)
}

// textResult returns a result whose structured content is out and whose
// text content is text.
func textResult(out map[string]any, text string) *registry.Result {
	return &registry.Result{Structured: out, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// toolError turns err into a tool-error result when it is an argument
// problem the model can fix, and reports whether it did.
func toolError(err error) (*registry.Result, bool) {
	if e, ok := err.(*argError); ok {
		return registry.ErrorResult(e.msg), true
	}
	return nil, false
}

// schemaFor infers the schema of T and panics if it cannot: the types are
// this package's own, so a failure is a programming mistake.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("builtin: inferring schema: %v", err))
	}
	return s
}

// formatBytes renders a byte count for messages.
func formatBytes(n int64) string { return bytesize.Format(n) }
