// Package schemaload is the one way a JSON Schema from outside enters
// orchestra: a client tool's input or output schema, an agent's output
// schema, a downstream server's tool schemas, the schemas a paused run
// brings back. [Load] bounds the schema's JSON with the decoding gate
// (internal/jsongate), resolves its references within the document, and
// refuses, with an error naming where the schema came from, what no walk
// of it could survive: a $ref that leads back to itself without
// descending into a value ({"$ref": "#"}, a cycle through $defs or
// allOf), a schema that applies too many of its parts to one value at
// once, and one that expands past a bound when its references are
// followed. Every walk of a loaded schema (validation, the template
// checks, the planner's rendering) is then finite and bounded.
//
// Validation time also depends on the value: a schema that applies two of
// its parts to the same member at every level takes time exponential in
// the value's depth. [CheckValue] counts what a validator would do for a
// value, without doing it, and stops at a budget.
//
//	s, err := schemaload.Load(`client tool "pick" input_schema`, raw, schemaload.DefaultLimits())
//	if err != nil {
//		return err // names the tool, the sub-schema and the fix
//	}
//	if err := schemaload.CheckValue(s, s, value); err != nil {
//		return err
//	}
package schemaload
