package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
)

// Portable returns the JSON of s as MCP clients are sent it, in the subset
// of JSON Schema the model APIs behind them accept, with its meaning kept:
//
//   - every boolean sub-schema is written as the object it stands for, true
//     as {} and false as {"not": {}}. jsonschema-go writes an empty schema
//     (the schema of an any-typed field, or of an output that can be
//     anything) as true, which JSON Schema allows but several MCP clients
//     refuse where they expect a schema object. additionalProperties,
//     unevaluatedProperties, additionalItems and unevaluatedItems keep
//     their booleans, which every client reads (and some require:
//     "additionalProperties": false);
//   - a schema of arrays without items gets "items": {} (any item, as
//     before): OpenAI refuses a function whose parameters have an array
//     without items, and clients guess one (Codex makes it an array of
//     strings).
//
// The order of keys, properties included, is kept. [PortableInput] is the
// form of a tool's input schema.
func Portable(s *jsonschema.Schema) (json.RawMessage, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return rewrite(data, roleSchema, "", nil)
}

// PortableInput is [Portable] for a tool's input schema, which model APIs
// take only as a plain object schema: a oneOf, anyOf or allOf at its top
// is folded into it. The properties its branches declare that the top
// does not are added to the top's properties (a branch never replaces the
// top's own definition of a property), an allOf's required names join the
// top's, and the combinator is dropped. The published schema then allows
// more than the tool does; the tool still checks its arguments (orchestra
// validates plans against the unchanged schema). A branch that is a $ref
// adds nothing.
func PortableInput(s *jsonschema.Schema) (json.RawMessage, error) {
	data, err := Portable(s)
	if err != nil {
		return nil, err
	}
	return foldCombinators(data)
}

// PortableInputOr returns [PortableInput] of s, or s itself when it does not
// encode (the SDK then reports the problem when the tool is added).
func PortableInputOr(s *jsonschema.Schema) any {
	if data, err := PortableInput(s); err == nil {
		return data
	}
	return s
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
		var array, items bool // a schema of arrays, and whether it says what their items are
		err := eachMember(data, func(i int, key string, value json.RawMessage) error {
			if r == roleSchema {
				switch key {
				case "type":
					array = allowsArray(value)
				case "items":
					items = true
				}
			}
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
		if array && !items {
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			b.WriteString(`"items":{}`)
		}
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	// Not a schema, or not the shape its keyword wants: left as it is.
	return data, nil
}

// foldCombinators folds the oneOf, anyOf and allOf at the top of the
// object schema data into it, as [PortableInput] says.
func foldCombinators(data json.RawMessage) (json.RawMessage, error) {
	var (
		members  []member
		branches []json.RawMessage
		all      []bool // whether each branch is an allOf's
		folded   bool
	)
	err := eachMember(data, func(_ int, key string, value json.RawMessage) error {
		if key != "oneOf" && key != "anyOf" && key != "allOf" {
			members = append(members, member{key, value})
			return nil
		}
		var list []json.RawMessage
		if err := json.Unmarshal(value, &list); err != nil {
			return fmt.Errorf("schema: %s is not a list of schemas: %w", key, err)
		}
		folded = true
		for _, b := range list {
			branches = append(branches, b)
			all = append(all, key == "allOf")
		}
		return nil
	})
	if err != nil || !folded {
		return data, err
	}
	var props []member
	var required []string
	seen := map[string]bool{}
	addProps := func(raw json.RawMessage) error {
		if len(raw) == 0 || raw[0] != '{' {
			return nil
		}
		return eachMember(raw, func(_ int, name string, v json.RawMessage) error {
			if !seen[name] {
				seen[name] = true
				props = append(props, member{name, v})
			}
			return nil
		})
	}
	addRequired := func(raw json.RawMessage) {
		var names []string
		_ = json.Unmarshal(raw, &names)
		for _, n := range names {
			if !slices.Contains(required, n) {
				required = append(required, n)
			}
		}
	}
	hasType := false
	for _, m := range members {
		switch m.key {
		case "properties":
			if err := addProps(m.value); err != nil {
				return nil, err
			}
		case "required":
			addRequired(m.value)
		case "type":
			hasType = true
		}
	}
	for i, raw := range branches {
		var branch struct {
			Properties json.RawMessage `json:"properties"`
			Required   json.RawMessage `json:"required"`
		}
		if json.Unmarshal(raw, &branch) != nil {
			continue // true, false: nothing to add
		}
		if err := addProps(branch.Properties); err != nil {
			return nil, err
		}
		if all[i] {
			addRequired(branch.Required)
		}
	}
	var out []member
	if !hasType { // a tool's arguments are an object, and the model APIs want it said
		out = append(out, member{"type", json.RawMessage(`"object"`)})
	}
	wroteProps, wroteRequired := false, false
	for _, m := range members {
		switch m.key {
		case "properties":
			m.value, wroteProps = encodeObject(props), true
		case "required":
			m.value, _ = json.Marshal(required)
			wroteRequired = true
		}
		out = append(out, m)
	}
	if !wroteProps && len(props) > 0 {
		out = append(out, member{"properties", encodeObject(props)})
	}
	if !wroteRequired && len(required) > 0 {
		r, _ := json.Marshal(required)
		out = append(out, member{"required", r})
	}
	return encodeObject(out), nil
}

// member is a member of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

// encodeObject returns the JSON object of members, in their order.
func encodeObject(members []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// allowsArray reports whether the value of a type keyword, "array" or a
// list of types, allows arrays.
func allowsArray(value json.RawMessage) bool {
	var one string
	if json.Unmarshal(value, &one) == nil {
		return one == "array"
	}
	var many []string
	if json.Unmarshal(value, &many) == nil {
		for _, t := range many {
			if t == "array" {
				return true
			}
		}
	}
	return false
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
