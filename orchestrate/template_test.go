package orchestrate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// refString renders a ref for comparison: step or binding, then the path.
func refString(r *Ref) string {
	if r.IsBinding() {
		return "bindings:" + r.Binding + PathString(r.Path)
	}
	return "step:" + r.Step + PathString(r.Path)
}

func TestParseTemplate(t *testing.T) {
	for _, tc := range []struct {
		in      string
		kind    TemplateKind
		literal string   // Literal
		refs    []string // Whole and Interpolated
		texts   []string // the Text of each ref
		parts   int      // Interpolated
	}{
		{in: "plain", kind: Literal, literal: "plain"},
		{in: "", kind: Literal, literal: ""},
		{in: "$5 dollars", kind: Literal, literal: "$5 dollars"},
		{in: "costs $5", kind: Literal, literal: "costs $5"},
		{in: "$", kind: Literal, literal: "$"},
		{in: "$$0.output.x", kind: Literal, literal: "$0.output.x"},
		{in: "$${0.output.x}", kind: Literal, literal: "${0.output.x}"},
		{in: "a $${b} c", kind: Literal, literal: "a ${b} c"},
		{in: "$research.title", kind: Literal, literal: "$research.title"},
		{in: "$0.outputs", kind: Literal, literal: "$0.outputs"},
		{in: "$0.output.x y", kind: Literal, literal: "$0.output.x y"},
		{in: "$0.output", kind: Whole, refs: []string{"step:0"}, texts: []string{"$0.output"}},
		{in: "$12.output.a.b", kind: Whole, refs: []string{"step:12.a.b"}},
		{in: "$research.output.sources[0].url", kind: Whole, refs: []string{"step:research.sources[0].url"}},
		{in: "$my-step_2.output[3][0]", kind: Whole, refs: []string{"step:my-step_2[3][0]"}},
		{in: `$r.output["a key"].b`, kind: Whole, refs: []string{`step:r["a key"].b`}},
		{in: `$r.output["quote\"d"]`, kind: Whole, refs: []string{`step:r["quote\"d"]`}},
		{in: `$r.output["dotted.key"]`, kind: Whole, refs: []string{`step:r["dotted.key"]`}},
		{in: "$bindings.user", kind: Whole, refs: []string{"bindings:user"}},
		{in: "$bindings.cfg.sizes[1]", kind: Whole, refs: []string{"bindings:cfg.sizes[1]"}},
		{in: "Hi ${bindings.user}!", kind: Interpolated, refs: []string{"bindings:user"}, texts: []string{"${bindings.user}"}, parts: 3},
		{in: "${0.output.a}${1.output.b}", kind: Interpolated, refs: []string{"step:0.a", "step:1.b"}, parts: 2},
		{in: "${r.output.title} has ${0.output.count} sources, $5 each", kind: Interpolated, refs: []string{"step:r.title", "step:0.count"}, parts: 4},
		{in: "${0.output}", kind: Interpolated, refs: []string{"step:0"}, parts: 1},
		{in: "a $0.output.x ${1.output.y}", kind: Interpolated, refs: []string{"step:1.y"}, parts: 2},
		{in: "$0.output.x${1.output.y}", kind: Interpolated, refs: []string{"step:1.y"}, parts: 2},
		{in: "price: $${amount} for ${bindings.user}", kind: Interpolated, refs: []string{"bindings:user"}, parts: 2},
	} {
		t.Run(tc.in, func(t *testing.T) {
			tmpl, err := ParseTemplate(tc.in)
			if err != nil {
				t.Fatalf("ParseTemplate(%q): %v", tc.in, err)
			}
			if tmpl.Kind != tc.kind {
				t.Fatalf("kind %v, want %v", tmpl.Kind, tc.kind)
			}
			if tc.kind == Literal {
				if tmpl.Literal != tc.literal {
					t.Errorf("literal %q, want %q", tmpl.Literal, tc.literal)
				}
				if len(tmpl.Refs()) != 0 {
					t.Errorf("a literal has refs %v", tmpl.Refs())
				}
				return
			}
			var refs, texts []string
			for _, r := range tmpl.Refs() {
				refs = append(refs, refString(r))
				texts = append(texts, r.Text)
			}
			if diff := cmp.Diff(tc.refs, refs); diff != "" {
				t.Errorf("refs (-want +got):\n%s", diff)
			}
			if tc.texts != nil && !cmp.Equal(tc.texts, texts) {
				t.Errorf("texts %q, want %q", texts, tc.texts)
			}
			if tc.kind == Interpolated && len(tmpl.Parts) != tc.parts {
				t.Errorf("%d parts, want %d", len(tmpl.Parts), tc.parts)
			}
		})
	}
}

func TestParseTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		in     string
		offset int
		reason string
	}{
		{"Title: ${r.output.title", 7, "not closed"},
		{"${}", 0, "expected a step index"},
		{"x ${bindings}", 2, `expected ".name" after "bindings"`},
		{"${bindings.}", 0, "expected a binding name"},
		{"${r.outputs.x}", 0, `expected ".output" after "$r"`},
		{"${r}", 0, `expected ".output"`},
		{"${r.output.}", 0, "expected a field name"},
		{"${r.output[x]}", 0, "not a non-negative integer"},
		{"${r.output[-1]}", 0, "not a non-negative integer"},
		{"${r.output[01]}", 0, "not a non-negative integer"},
		{"${r.output[1}", 0, `expected "]"`},
		{`${r.output["a}`, 0, "to close a quoted key"},
		{"${r.output.a b}", 12, `unexpected " b"`},
		{"${1a.output.x}", 0, "neither a step index nor a step id"},
		{"ok ${0.output.a} then ${", 22, "not closed"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseTemplate(tc.in)
			te, ok := err.(*TemplateError)
			if !ok {
				t.Fatalf("ParseTemplate(%q) = %v, want a *TemplateError", tc.in, err)
			}
			if te.Offset != tc.offset || !strings.Contains(te.Reason, tc.reason) || te.Text != tc.in {
				t.Errorf("error %+v, want offset %d and a reason with %q", te, tc.offset, tc.reason)
			}
		})
	}
}

// Canonical renders the whole-value form, which parses to the same ref.
func TestRefCanonicalRoundTrip(t *testing.T) {
	for _, in := range []string{
		"$0.output", "$r.output.a[2].b", `$r.output["a b"]["c\"d"][0]`, "$bindings.x", "${bindings.x.y[1]}", "${step-1.output.z}",
	} {
		tmpl, err := ParseTemplate(in)
		if err != nil {
			t.Fatal(err)
		}
		r := tmpl.Refs()[0]
		again, err := ParseTemplate(r.Canonical())
		if err != nil || again.Kind != Whole {
			t.Fatalf("%q: canonical %q does not parse as one reference: %v", in, r.Canonical(), err)
		}
		if got, want := refString(again.Ref), refString(r); got != want {
			t.Errorf("%q: canonical %q parses to %s, want %s", in, r.Canonical(), got, want)
		}
	}
}

// TestBindingName: what BindingName makes of a name is one a template
// reads as a whole binding, and a name that is one already is kept.
func TestBindingName(t *testing.T) {
	for in, want := range map[string]string{
		"limit": "limit", "max-results": "max-results", "_x": "_x",
		"1_limit": "_1_limit", "page size": "page_size", "a.b": "a_b", "-x": "_-x", "": "_", "ü": "__",
	} {
		got := BindingName(in)
		if got != want {
			t.Errorf("BindingName(%q) = %q; want %q", in, got, want)
		}
		tpl, err := ParseTemplate("$bindings." + got)
		if err != nil || tpl.Kind != Whole || tpl.Ref.Binding != got {
			t.Errorf("$bindings.%s does not parse as the whole binding %q: %v %+v", got, got, err, tpl)
		}
	}
}
