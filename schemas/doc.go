// Package schemas holds orchestra's JSON Schema helpers: walking a schema
// along a path of fields and indexes the way a template walks a value, and
// working out which JSON types a schema allows.
//
// Walking understands properties, patternProperties, additionalProperties,
// items, prefixItems (and draft-07 tuple items), $ref into $defs or draft-07
// definitions (or any JSON pointer into the root), allOf, anyOf, oneOf and
// type arrays such as ["null", "string"]:
//
//	n, err := schemas.Walk(outputSchema, []schemas.Seg{{Key: "sources"}, {Index: 0, IsIndex: true}, {Key: "url"}})
//	// err is a *schemas.WalkError listing the fields that exist when one does not.
//	types := n.Types() // ["string"]
package schemas
