package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// ExtractJSON returns the JSON value a model wrote in text: the content of
// a Markdown code fence (```json ... ```) when there is one, otherwise the
// first JSON object or array in the text. Text around the value is ignored.
func ExtractJSON(text string) (json.RawMessage, error) {
	s := strings.TrimSpace(text)
	if body, ok := fenced(s); ok {
		s = body
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s), nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '{' && s[i] != '[' {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var v json.RawMessage
		if err := dec.Decode(&v); err == nil {
			return bytes.Clone(v), nil
		}
	}
	return nil, errors.New("the answer contains no JSON object")
}

// fenced returns the body of the first code fence in s.
func fenced(s string) (string, bool) {
	start := strings.Index(s, "```")
	if start < 0 {
		return "", false
	}
	rest := s[start+3:]
	nl := strings.IndexByte(rest, '\n')
	if nl < 0 {
		return "", false
	}
	rest = rest[nl+1:] // drop the info string ("json")
	end := strings.Index(rest, "```")
	if end < 0 {
		return strings.TrimSpace(rest), true
	}
	return strings.TrimSpace(rest[:end]), true
}

// rawArguments returns s as JSON arguments: "{}" when empty, and s encoded
// as a JSON string when it is not valid JSON, so that the caller can report
// exactly what the model wrote.
func rawArguments(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func argsOrEmpty(a json.RawMessage) json.RawMessage {
	if len(a) == 0 {
		return json.RawMessage("{}")
	}
	return a
}
