package orchestrate

import (
	"fmt"
	"strings"
	"testing"
)

// TestClientToolsCapped checks that a request declaring more client tools
// than MaxClientTools is refused with one issue that says the cap, rather
// than loading every tool's schemas.
func TestClientToolsCapped(t *testing.T) {
	tools := make([]string, MaxClientTools+1)
	for i := range tools {
		tools[i] = fmt.Sprintf(`{"name":"t%d"}`, i)
	}
	req := `{"client_tools":[` + strings.Join(tools, ",") + `],"plan":{"steps":[{"tool":"t0"}]}}`
	_, issues := DecodeRequest([]byte(req))
	if len(issues) != 1 {
		t.Fatalf("got %d issues, want 1: %v", len(issues), issues)
	}
	if is := issues[0]; is.Path != "client_tools" || is.Code != CodeInvalidValue || !strings.Contains(is.Message, fmt.Sprint(MaxClientTools)) {
		t.Errorf("issue = %+v, want client_tools %s naming the cap %d", is, CodeInvalidValue, MaxClientTools)
	}
	if _, issues := DecodeRequest([]byte(`{"client_tools":[` + strings.Join(tools[:MaxClientTools], ",") + `],"plan":{"steps":[{"tool":"t0"}]}}`)); len(issues) != 0 {
		t.Errorf("%d client tools refused: %v", MaxClientTools, issues)
	}
}
