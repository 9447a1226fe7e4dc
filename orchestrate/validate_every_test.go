package orchestrate

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// TestEveryArgumentErrorOfAStep checks that a step's arguments are reported
// with every schema error at once — a missing required field is not hidden
// behind a type error — so that one repair round can fix them all, with or
// without templates among the arguments.
func TestEveryArgumentErrorOfAStep(t *testing.T) {
	noop := func(context.Context, map[string]any) (*registry.Result, error) {
		return structured(map[string]any{"n": 1}), nil
	}
	tools := registry.NewCatalog(
		fakeTool(t, "src", "", `{"type":"object","properties":{"n":{"type":"integer"}}}`, noop),
		fakeTool(t, "book", `{"type":"object","properties":{
			"city":{"type":"string"},
			"nights":{"type":"integer"},
			"room":{"type":"string","enum":["single","double"]},
			"note":{"type":"string"}},
			"required":["city","nights","room"],"additionalProperties":false}`, "", noop),
	)
	e := NewEngine(Options{Tools: tools})
	type issue struct {
		Path, Argument string
		Code           Code
	}
	want := []issue{
		{"plan.steps[1].arguments", "city", CodeInvalidArguments},
		{"plan.steps[1].arguments.nights", "nights", CodeInvalidArguments},
		{"plan.steps[1].arguments.room", "room", CodeInvalidArguments},
	}
	for name, note := range map[string]string{"literal": `"late"`, "templated": `"${0.output.n} guests"`} {
		t.Run(name, func(t *testing.T) {
			req := mustRequest(t, `{"plan":{"steps":[{"tool":"src"},
				{"tool":"book","arguments":{"nights":"two","room":"suite","note":`+note+`}}]}}`)
			var got []issue
			for _, is := range e.Validate(req).Errors {
				got = append(got, issue{is.Path, is.Argument, is.Code})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("issues (-want +got):\n%s", diff)
			}
		})
	}
}
