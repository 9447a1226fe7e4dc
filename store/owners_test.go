package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRenameOwners: the records of owners written before owners were
// namespaced take the namespaced owner the caller decides; those it
// declines keep their bare name; a lesson the new owner learned again
// since wins over the old one; a second pass renames nothing.
func TestRenameOwners(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		base := time.Unix(1700000000, 0)
		for i, owner := range []string{"alice", "bob", "static:carol", "", "alice"} {
			if err := s.StartRun(ctx, Run{ExecID: string(rune('a' + i)), Owner: owner, Tool: "agent_orchestrate", StartedAt: base.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RecordInsights(ctx,
			Insight{Owner: "alice", Tool: "t", Key: "k1", Kind: "tool_error", Lesson: "old"},
			Insight{Owner: "alice", Tool: "t", Key: "k2", Kind: "tool_error", Lesson: "only old"},
			Insight{Owner: "static:alice", Tool: "t", Key: "k1", Kind: "tool_error", Lesson: "new"},
		); err != nil {
			t.Fatal(err)
		}
		rename := func(o string) (string, bool) {
			if o == "alice" {
				return "static:alice", true
			}
			return "", false // bob could be either kind of caller
		}
		n, err := s.RenameOwners(ctx, rename)
		if err != nil || n != 1 {
			t.Fatalf("RenameOwners = %d, %v; want 1 owner renamed", n, err)
		}
		owners := map[string]string{}
		runs, _, err := s.List(ctx, ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			owners[r.ExecID] = r.Owner
		}
		want := map[string]string{"a": "static:alice", "b": "bob", "c": "static:carol", "d": "", "e": "static:alice"}
		if diff := cmp.Diff(want, owners); diff != "" {
			t.Errorf("owners (-want +got):\n%s", diff)
		}
		ins, err := s.Insights(ctx, InsightQuery{Scope: OwnerScope("static:alice")})
		if err != nil {
			t.Fatal(err)
		}
		lessons := map[string]string{}
		for _, in := range ins {
			lessons[in.Key] = in.Lesson
		}
		if diff := cmp.Diff(map[string]string{"k1": "new", "k2": "only old"}, lessons); diff != "" {
			t.Errorf("static:alice's lessons (-want +got):\n%s", diff)
		}
		if left, _ := s.Insights(ctx, InsightQuery{Scope: OwnerScope("alice")}); len(left) != 0 {
			t.Errorf("lessons left under the bare name: %v", left)
		}
		if n, err := s.RenameOwners(ctx, rename); err != nil || n != 0 {
			t.Errorf("a second pass renamed %d (%v)", n, err)
		}
	})
}
