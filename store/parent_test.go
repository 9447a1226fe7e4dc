package store

import (
	"testing"
)

// A run started by another names it; Get and List read it back.
func TestParentExecID(t *testing.T) {
	ctx := t.Context()
	s := openTest(t, Memory, Options{})
	if err := s.StartRun(ctx, Run{ExecID: "parent", Tool: "agent_orchestrate"}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartRun(ctx, Run{ExecID: "child", Tool: "agent__a", ParentExecID: "parent"}); err != nil {
		t.Fatal(err)
	}
	r, _, err := s.Get(ctx, "child")
	if err != nil || r.ParentExecID != "parent" {
		t.Fatalf("Get: %+v, %v", r, err)
	}
	runs, _, err := s.List(ctx, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range runs {
		got[r.ExecID] = r.ParentExecID
	}
	if got["child"] != "parent" || got["parent"] != "" {
		t.Errorf("List: parents %v", got)
	}
}
