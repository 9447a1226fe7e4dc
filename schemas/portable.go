package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
)

// Portable returns the JSON of s as MCP clients are sent it: every boolean
// sub-schema is written as the object it stands for, true as {} and false
// as {"not": {}}. jsonschema-go writes an empty schema (the schema of an
// any-typed field, or of an output that can be anything) as true, which
// JSON Schema allows but several MCP clients refuse where they expect a
// schema object. additionalProperties, unevaluatedProperties,
// additionalItems and unevaluatedItems keep their booleans, which every
// client reads (and some require: "additionalProperties": false). The
// order of keys, properties included, is kept.
func Portable(s *jsonschema.Schema) (json.RawMessage, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return rewrite(data, roleSchema, "", nil)
}

// PortableOr returns [Portable] of s, or s itself when it does not encode
// (the SDK then reports the problem when the tool is added).
func PortableOr(s *jsonschema.Schema) any {
	if data, err := Portable(s); err == nil {
		return data
	}
	return s
}

// BooleanSubschemas returns the JSON pointers of the boolean schemas in
// the schema data where a client expects a schema object, the root
// included: what [Portable] leaves none of.
func BooleanSubschemas(data []byte) ([]string, error) {
	var found []string
	_, err := rewrite(data, roleSchema, "", &found)
	return found, err
}

// role is what a JSON value is within a schema.
type role int

const (
	roleOther        role = iota // not a schema: enum, const, default, examples, required...
	roleSchema                   // a schema
	roleSchemaMap                // an object whose values are schemas: properties, $defs...
	roleSchemaList               // an array of schemas: allOf, anyOf, oneOf, prefixItems
	roleItems                    // items: a schema, or (draft-07 tuples) an array of schemas
	roleDependencies             // draft-07 dependencies: an object of schemas and lists of property names
	roleOpenness                 // additionalProperties and its kin: a schema, or a boolean every client reads
)

// keywordRoles are the keywords whose values are, or hold, schemas.
var keywordRoles = map[string]role{
	"items": roleItems, "additionalItems": roleOpenness, "unevaluatedItems": roleOpenness, "contains": roleSchema,
	"additionalProperties": roleOpenness, "unevaluatedProperties": roleOpenness, "propertyNames": roleSchema,
	"not": roleSchema, "if": roleSchema, "then": roleSchema, "else": roleSchema, "contentSchema": roleSchema,
	"properties": roleSchemaMap, "patternProperties": roleSchemaMap, "$defs": roleSchemaMap,
	"definitions": roleSchemaMap, "dependentSchemas": roleSchemaMap, "dependencies": roleDependencies,
	"allOf": roleSchemaList, "anyOf": roleSchemaList, "oneOf": roleSchemaList, "prefixItems": roleSchemaList,
}

// rewrite returns data, a value of role r at JSON pointer at, with its
// boolean schemas replaced; with found set, it only lists their pointers
// there.
func rewrite(data []byte, r role, at string, found *[]string) (json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("schema: no value at %q", orRootPointer(at))
	}
	switch {
	case r == roleItems && data[0] == '[':
		r = roleSchemaList
	case r == roleItems || (r == roleOpenness && data[0] == '{'):
		r = roleSchema
	}
	switch {
	case r == roleSchema && (bytes.Equal(data, []byte("true")) || bytes.Equal(data, []byte("false"))):
		if found != nil {
			*found = append(*found, orRootPointer(at))
		}
		if data[0] == 't' {
			return json.RawMessage(`{}`), nil
		}
		return json.RawMessage(`{"not":{}}`), nil
	case r == roleSchemaList && data[0] == '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(data, &elems); err != nil {
			return nil, fmt.Errorf("schema at %q: %w", orRootPointer(at), err)
		}
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range elems {
			out, err := rewrite(e, roleSchema, at+"/"+strconv.Itoa(i), found)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(out)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	case (r == roleSchema || r == roleSchemaMap || r == roleDependencies) && data[0] == '{':
		var b bytes.Buffer
		b.WriteByte('{')
		err := eachMember(data, func(i int, key string, value json.RawMessage) error {
			var vr role
			switch r {
			case roleSchema:
				vr = keywordRoles[key]
			case roleSchemaMap:
				vr = roleSchema
			case roleDependencies:
				vr = roleSchema // or a list of property names, which rewrite leaves alone
			}
			out, err := rewrite(value, vr, at+"/"+escapePointer(key), found)
			if err != nil {
				return err
			}
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(key)
			b.Write(k)
			b.WriteByte(':')
			b.Write(out)
			return nil
		})
		if err != nil {
			return nil, err
		}
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	// Not a schema, or not the shape its keyword wants: left as it is.
	return data, nil
}

// eachMember calls f with the members of the JSON object data, in order.
func eachMember(data []byte, f func(i int, key string, value json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for i := 0; dec.More(); i++ {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return err
		}
		if err := f(i, key, value); err != nil {
			return err
		}
	}
	return nil
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(key string) string {
	var b []byte
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '~':
			b = append(b, "~0"...)
		case '/':
			b = append(b, "~1"...)
		default:
			b = append(b, key[i])
		}
	}
	return string(b)
}

func orRootPointer(at string) string {
	if at == "" {
		return "/"
	}
	return at
}
