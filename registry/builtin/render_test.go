package builtin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
)

func TestRender(t *testing.T) {
	tool := Render(RenderConfig{}, testOpts)
	tests := []struct {
		name     string
		template string
		values   string
		want     string
	}{
		{"plain", "hello", `{}`, "hello"},
		{"no values", "hello", ``, "hello"},
		{"field", "Hello {{.name}}!", `{"name": "Ana"}`, "Hello Ana!"},
		{"nested", "{{.user.name}} {{index .list 1}}", `{"user": {"name": "Bo"}, "list": ["a", "b"]}`, "Bo b"},
		{"whole numbers print as integers", "{{.n}} {{.f}} {{.big}}", `{"n": 3, "f": 1.5, "big": 1000000}`, "3 1.5 1000000"},
		{"compare numbers", "{{if eq .n 3}}three{{end}} {{if gt .f 1.0}}big{{end}}", `{"n": 3, "f": 1.5}`, "three big"},
		{"range over an integer", "{{range 3}}x{{end}}", `{}`, "xxx"},
		{"range over a map", "{{range $k, $v := .m}}{{$k}}={{$v}} {{end}}", `{"m": {"b": 2, "a": 1}}`, "a=1 b=2 "},
		{"range else", "{{range .l}}x{{else}}empty{{end}}", `{"l": []}`, "empty"},
		{"range in a define", `{{define "row"}}{{range .}}[{{.}}]{{end}}{{end}}{{template "row" .l}}`, `{"l": [1, 2]}`, "[1][2]"},
		{"range", "{{range $i, $x := .items}}{{$i}}={{$x.name}};{{end}}", `{"items": [{"name": "a"}, {"name": "b"}]}`, "0=a;1=b;"},
		{"if else", "{{if .ok}}yes{{else}}no{{end}}", `{"ok": false}`, "no"},
		{"trim markers", "a  {{- .x -}}  b", `{"x": "-"}`, "a-b"},
		{"json", "{{json .v}}", `{"v": {"a": [1, "x", null]}}`, `{"a":[1,"x",null]}`},
		{"join", `{{join ", " .names}}`, `{"names": ["a", "b", 3]}`, "a, b, 3"},
		{"join pipeline", `{{.names | join "+"}}`, `{"names": ["a", "b"]}`, "a+b"},
		{"upper lower trim", "{{upper .a}} {{lower .b}} [{{trim .c}}]", `{"a": "x", "b": "Y", "c": "  z  "}`, "X y [z]"},
		{"default empty", `{{.x | default "none"}}`, `{"x": ""}`, "none"},
		{"default null", `{{.x | default "none"}}`, `{"x": null}`, "none"},
		{"default set", `{{.x | default "none"}}`, `{"x": "set"}`, "set"},
		{"default missing key", `{{index . "x" | default "none"}}`, `{}`, "none"},
		{"indent", "{{indent 2 .t}}", `{"t": "a\nb\n\nc"}`, "  a\n  b\n\n  c"},
		{"indent number from values", "{{indent .n .t}}", `{"n": 1, "t": "a"}`, " a"},
		{"printf len", `{{printf "%d items" (len .items)}}`, `{"items": [1, 2]}`, "2 items"},
		{"comment", "a{{/* note */}}b", `{}`, "ab"},
	}
	for _, tt := range tests {
		for _, useNumber := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				args := map[string]any{"template": tt.template}
				if tt.values != "" {
					args["values"] = decodeArgs(t, tt.values, useNumber)
				}
				res, err := tool.Invoke(t.Context(), &registry.CallRequest{Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				if res.IsError {
					t.Fatalf("tool error: %s", res.Text())
				}
				if diff := cmp.Diff(map[string]any{"text": tt.want}, res.Output()); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				if got := res.Text(); got != tt.want {
					t.Errorf("text content = %q, want %q", got, tt.want)
				}
			})
		}
	}
}

func TestRenderErrors(t *testing.T) {
	tool := Render(RenderConfig{MaxOutputBytes: 100}, testOpts)
	tests := []struct {
		name      string
		args      string
		fragments []string
	}{
		{"missing template", `{"values": {}}`, []string{`"template" is required`}},
		{"template not a string", `{"template": 1}`, []string{`"template" must be a string`}},
		{"values not an object", `{"template": "x", "values": [1]}`, []string{`"values" must be an object`}},
		{"unknown argument", `{"template": "x", "vars": {}}`, []string{`unknown argument "vars"`}},
		{"unclosed action", `{"template": "{{.x"}`, []string{"does not parse", "line 1", "unclosed action"}},
		{"missing end", `{"template": "{{if .x}}a"}`, []string{"does not parse", "{{end}}"}},
		{"unknown function", `{"template": "{{frob .x}}"}`, []string{"does not parse", `"frob" not defined`, "default, indent, join, json, lower, trim, upper"}},
		{"missing key", `{"template": "{{.nope}}", "values": {"a": 1, "b": 2}}`, []string{"template failed", "line 1, column 2", `no entry for key "nope"`, "[a, b]", "index . "}},
		{"missing nested key", `{"template": "{{.a.nope}}", "values": {"a": {}}}`, []string{"template failed", `no entry for key "nope"`}},
		{"join of a string", `{"template": "{{join \",\" .s}}", "values": {"s": "x"}}`, []string{"template failed", "join: the list must be an array"}},
		{"bad indent", `{"template": "{{indent -1 .s}}", "values": {"s": "x"}}`, []string{"indent: the width"}},
		{"output too large", `{"template": "{{range .items}}0123456789{{end}}", "values": {"items": [1,2,3,4,5,6,7,8,9,10,11]}}`,
			[]string{"exceeds 100 bytes", "render.max_output_bytes"}},
		{"long output", `{"template": "{{range 100000}}x{{end}}"}`, []string{"exceeds 100 bytes"}},
		{"empty loop over a huge number", `{"template": "{{range 1000000000}}{{end}}"}`, []string{"more than 1000000 iterations"}},
		{"empty loop over a huge value", `{"template": "{{range .n}}{{end}}", "values": {"n": 1e12}}`, []string{"more than 1000000 iterations"}},
		{"nested empty loops", `{"template": "{{range $.l}}{{range $.l}}{{range $.l}}{{end}}{{end}}{{end}}", "values": {"l": [` + strings.Repeat("1,", 199) + `1]}}`, []string{"more than 1000000 iterations"}},
		{"recursive loops", `{"template": "{{define \"a\"}}{{range .}}{{template \"a\" $}}{{end}}{{end}}{{template \"a\" .l}}", "values": {"l": [1, 2]}}`, []string{"recursive (a -> a)", "not supported"}},
		{"endless recursion", `{"template": "{{define \"a\"}}{{template \"a\"}}{{end}}{{template \"a\"}}"}`, []string{"recursive (a -> a)"}},
		{"mutual recursion", `{"template": "{{define \"a\"}}{{if .}}{{template \"b\" .}}{{end}}{{end}}{{define \"b\"}}{{with .}}{{template \"a\" .}}{{end}}{{end}}{{template \"a\" 1}}"}`, []string{"recursive (a -> b -> a)"}},
		{"undefined template", `{"template": "{{template \"nope\"}}"}`, []string{"template failed", "nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, tool, tt.args)
			wantToolError(t, res, err, tt.fragments...)
			if strings.Contains(res.Text(), "template: render:") {
				t.Errorf("error %q leaks the template's internal name", res.Text())
			}
		})
	}
}

func TestRenderCancelled(t *testing.T) {
	ctx, cancel := contextWithCancel(t)
	cancel()
	_, err := Render(RenderConfig{}, testOpts).Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"template": "{{range 100}}x{{end}}"}})
	if err == nil {
		t.Fatal("got no error from a cancelled call")
	}
}
