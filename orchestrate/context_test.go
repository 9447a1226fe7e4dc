package orchestrate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeCallerContext(t *testing.T) {
	req, issues := DecodeRequest([]byte(`{"prompt":"p","context":{
		"instructions":"Be brief.","agent_instructions":"Answer in French.",
		"history":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}],
		"facts":{"city":"Paris"},"session_context":{"user":"ann"}}}`))
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	want := &CallerContext{
		Instructions: "Answer in French.\nBe brief.",
		History:      []Turn{{"user", "hi"}, {"assistant", "hello"}},
		Facts:        map[string]any{"city": "Paris", "user": "ann"},
	}
	if diff := cmp.Diff(want, req.Context); diff != "" {
		t.Errorf("context (-want +got):\n%s", diff)
	}
	for in, wantIssue := range map[string]string{
		`"yes"`:                      "context must be an object",
		`{"history":"hi"}`:           "history must be an array",
		`{"history":["hi"]}`:         "a turn must be an object",
		`{"facts":[1]}`:              "facts must be an object",
		`{"instructions":1}`:         "instructions must be a string",
		`{"instruction":"be brief"}`: "instruction",
	} {
		_, issues := DecodeRequest([]byte(`{"prompt":"p","context":` + in + `}`))
		if len(issues) == 0 || !strings.Contains(issues[0].Message, wantIssue) || !strings.HasPrefix(issues[0].Path, "context") {
			t.Errorf("context %s: issues %v, want %q", in, issues, wantIssue)
		}
	}
}
