package orchestrate

import "encoding/json"

// plainJSON returns v as the JSON value it encodes to, in the types
// encoding/json decodes into an any: map[string]any, []any, string,
// float64, bool and nil. A tool's output is such a value when it came over
// the wire; an in-process tool's may be typed (an int count, a struct, a
// json.Number), which conditions, templates and the answer would otherwise
// each read in their own way (an int 0 was truthy). A value that is plain
// already is returned as it is, uncopied; one that does not encode is too
// (the envelope reports it when it is encoded).
func plainJSON(v any) any {
	if isPlain(v) {
		return v
	}
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return v
	}
	return out
}

// isPlain reports whether v holds only the types of a decoded JSON value.
func isPlain(v any) bool {
	switch v := v.(type) {
	case nil, string, float64, bool:
		return true
	case map[string]any:
		for _, e := range v {
			if !isPlain(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !isPlain(e) {
				return false
			}
		}
		return true
	}
	return false
}
