package nestful

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// tool builds the registry tool of d, with a fake Call.
func (d *toolDef) tool() registry.Tool {
	t := registry.Tool{
		Name:         d.name,
		Description:  d.desc,
		InputSchema:  d.in,
		OutputSchema: d.out,
		Source:       "nestful",
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
	}
	if d.name != d.orig {
		t.Title = d.orig
	}
	if d.result {
		t.Call = func(_ context.Context, req *registry.CallRequest) (*registry.Result, error) {
			out := map[string]any{}
			for k, v := range req.Arguments {
				out[k] = deepCopy(v)
			}
			return result(out), nil
		}
		return t
	}
	value := fakeValue(d.out, d.extras, "")
	t.Call = func(context.Context, *registry.CallRequest) (*registry.Result, error) {
		return result(deepCopy(value)), nil
	}
	return t
}

func result(v any) *registry.Result {
	text, _ := json.Marshal(v)
	return &registry.Result{Structured: v, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
}

// fakeValue returns a deterministic value of the type s declares at path,
// with values at the undeclared paths ex records. Arrays get at least one
// element, so that [0] resolves.
func fakeValue(s *jsonschema.Schema, ex *extra, path string) any {
	if ex != nil && len(ex.fields) > 0 {
		obj := map[string]any{}
		if s != nil && (hasType(s, "object") || len(typesOf(s)) == 0) {
			if m, ok := fakeValue(s, nil, path).(map[string]any); ok {
				obj = m
			}
		}
		for f, fe := range ex.fields {
			var fs *jsonschema.Schema
			if s != nil {
				fs = s.Properties[f]
			}
			obj[f] = fakeValue(fs, fe, path+"."+f)
		}
		addDeclared(obj, s, ex, path)
		return obj
	}
	if ex != nil && ex.index != nil {
		var items *jsonschema.Schema
		if s != nil {
			items = s.Items
		}
		arr := make([]any, ex.maxIndex+1)
		for i := range arr {
			arr[i] = fakeValue(items, ex.index, path+"[]")
		}
		return arr
	}
	var types []string
	if s != nil {
		if len(s.Enum) > 0 {
			return s.Enum[0]
		}
		types = typesOf(s)
	}
	typ := "string"
	switch {
	case len(types) > 0:
		typ = types[0]
		if typ == "null" && len(types) > 1 {
			typ = types[1]
		}
	case s != nil && len(s.Properties) > 0:
		typ = "object"
	case s != nil && s.Items != nil:
		typ = "array"
	case ex != nil && ex.leaf != "":
		typ = ex.leaf
	}
	switch typ {
	case "object":
		obj := map[string]any{}
		addDeclared(obj, s, ex, path)
		return obj
	case "array":
		var items *jsonschema.Schema
		if s != nil {
			items = s.Items
		}
		return []any{fakeValue(items, nil, path+"[]")}
	case "integer":
		return float64(7)
	case "number":
		return 2.5
	case "boolean":
		return true
	case "null":
		return nil
	}
	name := path[strings.LastIndexAny(path, ".]")+1:]
	if name == "" {
		name = "item"
	}
	return "fake " + name
}

// addDeclared fills obj with the properties s declares.
func addDeclared(obj map[string]any, s *jsonschema.Schema, ex *extra, path string) {
	if s == nil {
		return
	}
	for _, f := range slices.Sorted(maps.Keys(s.Properties)) {
		if _, done := obj[f]; done {
			continue
		}
		var fe *extra
		if ex != nil {
			fe = ex.fields[f]
		}
		obj[f] = fakeValue(s.Properties[f], fe, path+"."+f)
	}
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
