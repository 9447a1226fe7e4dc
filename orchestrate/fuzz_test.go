package orchestrate

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeRequest checks that decoding never panics, returns a request or
// issues (never both, never neither), and that a decoded request re-encodes
// to JSON that decodes to the same normalized request.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"plan":{"steps":[{"tool":"echo","arguments":{"x":1}}]}}`))
	f.Add([]byte(`{"plan":{"steps":[{"id":"l","tool":"echo"},{"id":"r","for_each":"$l.output.items","as":"it","max_concurrency":2,"do":{"when":"$it.ok","parallel":[{"tool":"echo","arguments":{"x":"$it_index"}}]}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, issues := DecodeRequest(data)
		if (req == nil) == (len(issues) == 0) {
			t.Fatalf("DecodeRequest(%q) returned request %v and %d issues", data, req != nil, len(issues))
		}
		for _, is := range issues {
			if is.Code == "" || is.Message == "" {
				t.Fatalf("issue without code or message: %+v", is)
			}
			if !utf8.ValidString(is.Message) && utf8.Valid(data) {
				t.Fatalf("issue message is not UTF-8: %q", is.Message)
			}
		}
		if req == nil {
			return
		}
		first, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("marshalling %q: %v", data, err)
		}
		again, issues := DecodeRequest(first)
		if len(issues) > 0 {
			out, _ := json.Marshal(issues)
			t.Fatalf("the normalized request of %q,\n%s,\ndoes not decode: %s", data, first, out)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(first, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(second, &b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("the normalized request of %q changes when decoded again (-first +second):\n%s", data, diff)
		}
	})
}

// renderTemplate writes a parsed template back as text.
func renderTemplate(tmpl *Template) string {
	escape := func(s string) string { return strings.ReplaceAll(s, "${", "$${") }
	switch tmpl.Kind {
	case Literal:
		if strings.HasPrefix(tmpl.Literal, "$") {
			return "$" + tmpl.Literal // "$$" keeps all the rest as it is
		}
		return escape(tmpl.Literal)
	case Whole:
		return tmpl.Ref.Canonical()
	}
	var b strings.Builder
	for _, p := range tmpl.Parts {
		if p.Ref == nil {
			b.WriteString(escape(p.Text))
			continue
		}
		b.WriteString("${" + strings.TrimPrefix(p.Ref.Canonical(), "$") + "}")
	}
	return b.String()
}

// FuzzParseTemplate checks that parsing never panics, that errors point
// into the string, and that a parsed template rendered back parses to the
// same kind and references.
func FuzzParseTemplate(f *testing.F) {
	f.Add("${research.output.title} has ${0.output.count}")
	f.Fuzz(func(t *testing.T, s string) {
		tmpl, err := ParseTemplate(s)
		if err != nil {
			te, ok := err.(*TemplateError)
			if !ok {
				t.Fatalf("ParseTemplate(%q) returned %T, want *TemplateError", s, err)
			}
			if te.Offset < 0 || te.Offset > len(s) || te.Text != s {
				t.Fatalf("ParseTemplate(%q): error %+v points outside the string", s, te)
			}
			return
		}
		text := renderTemplate(tmpl)
		again, err := ParseTemplate(text)
		if err != nil {
			t.Fatalf("ParseTemplate(%q) rendered as %q, which does not parse: %v", s, text, err)
		}
		if again.Kind != tmpl.Kind {
			t.Fatalf("ParseTemplate(%q) is kind %v; rendered as %q it is kind %v", s, tmpl.Kind, text, again.Kind)
		}
		if tmpl.Kind == Literal && again.Literal != tmpl.Literal {
			t.Fatalf("ParseTemplate(%q) is the literal %q; rendered as %q it is %q", s, tmpl.Literal, text, again.Literal)
		}
		var want, got []string
		for _, r := range tmpl.Refs() {
			want = append(want, refString(r))
		}
		for _, r := range again.Refs() {
			got = append(got, refString(r))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("ParseTemplate(%q) rendered as %q has other refs (-want +got):\n%s", s, text, diff)
		}
		if tmpl.Kind == Interpolated {
			var wantText, gotText []string
			for _, p := range tmpl.Parts {
				wantText = append(wantText, p.Text)
			}
			for _, p := range again.Parts {
				gotText = append(gotText, p.Text)
			}
			if !cmp.Equal(wantText, gotText) {
				t.Fatalf("ParseTemplate(%q) rendered as %q has other text parts: %q, want %q", s, text, gotText, wantText)
			}
		}
	})
}
