package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

func TestInsightsSurviveReopen(t *testing.T) {
	t.Run("file", func(t *testing.T) { insightsSurviveReopen(t, tempDB(t)) })
	t.Run("postgres", func(t *testing.T) { insightsSurviveReopen(t, pgtest.URL(t)) })
}

func insightsSurviveReopen(t *testing.T, path string) {
	ctx := t.Context()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordInsights(ctx,
		Insight{Owner: "alice", Tool: "fetch", Key: "tool_error:url", Kind: "tool_error", Lesson: "fetch failed: 404 for url=/x"},
		Insight{Owner: "bob", Tool: "fetch", Key: "timeout", Kind: "timeout", Lesson: "fetch timed out"},
	); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, Options{})
	got, err := s.Insights(ctx, InsightQuery{Scope: OwnerScope("alice")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Lesson != "fetch failed: 404 for url=/x" || got[0].Count != 1 || got[0].Owner != "alice" {
		t.Fatalf("alice's insights after reopening = %+v", got)
	}
	all, err := s.Insights(ctx, InsightQuery{})
	if err != nil || len(all) != 2 {
		t.Fatalf("every insight = %+v, %v", all, err)
	}
	// The same owner in another tenant has insights of its own.
	if err := s.RecordInsights(ctx, Insight{Owner: "alice", Tenant: "acme", Tool: "fetch", Key: "timeout", Kind: "timeout", Lesson: "fetch timed out at acme"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Insights(ctx, InsightQuery{Scope: OwnerScope("alice").InTenant("")}); len(got) != 1 || got[0].Tenant != "" {
		t.Errorf("alice without a tenant sees %+v", got)
	}
	if got, _ := s.Insights(ctx, InsightQuery{Scope: OwnerScope("alice").InTenant("acme")}); len(got) != 1 || got[0].Lesson != "fetch timed out at acme" {
		t.Errorf("alice at acme sees %+v", got)
	}
	if n, err := s.ClearInsights(ctx, TenantScope("acme")); err != nil || n != 1 {
		t.Fatalf("ClearInsights(acme) = %d, %v", n, err)
	}
	if n, err := s.ClearInsights(ctx, OwnerScope("bob")); err != nil || n != 1 {
		t.Fatalf("ClearInsights(bob) = %d, %v", n, err)
	}
	if all, _ := s.Insights(ctx, InsightQuery{}); len(all) != 1 || all[0].Owner != "alice" {
		t.Errorf("after clearing bob's: %+v", all)
	}
}

func TestInsightsCountedCappedAndAged(t *testing.T) {
	both(t, insightsCountedCappedAndAged)
}

func insightsCountedCappedAndAged(t *testing.T, path string) {
	ctx := t.Context()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := openTest(t, path, Options{Now: func() time.Time { return now }})
	// The same lesson three times is one insight counted three times, with
	// the latest text.
	for i := range 3 {
		if err := s.RecordInsights(ctx, Insight{Tool: "t", Key: "repair:x", Kind: "repair", Lesson: fmt.Sprint("lesson ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Insights(ctx, InsightQuery{Tools: []string{"t"}})
	if err != nil || len(got) != 1 || got[0].Count != 3 || got[0].Lesson != "lesson 2" || !got[0].FirstSeen.Equal(now) {
		t.Fatalf("insights = %+v, %v", got, err)
	}
	// At most MaxInsightsPerTool per tool: the most seen stays.
	for i := range MaxInsightsPerTool + 5 {
		now = now.Add(time.Second)
		if err := s.RecordInsights(ctx, Insight{Tool: "t", Key: fmt.Sprint("k", i), Kind: "tool_error", Lesson: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = s.Insights(ctx, InsightQuery{Tools: []string{"t"}})
	if len(got) != MaxInsightsPerTool || got[0].Key != "repair:x" {
		t.Fatalf("%d insights kept, first %+v", len(got), got[0])
	}
	if other, _ := s.Insights(ctx, InsightQuery{Tools: []string{"u"}}); len(other) != 0 {
		t.Errorf("another tool's insights = %+v", other)
	}
	if top, _ := s.Insights(ctx, InsightQuery{Limit: 3}); len(top) != 3 {
		t.Errorf("Limit 3 gave %d", len(top))
	}
	// Not seen for InsightMaxAge: gone from reads at once, deleted at the
	// next record.
	now = now.Add(InsightMaxAge + time.Minute)
	if got, _ := s.Insights(ctx, InsightQuery{}); len(got) != 0 {
		t.Errorf("aged insights are still read: %d", len(got))
	}
	if err := s.RecordInsights(ctx, Insight{Tool: "u", Key: "k", Kind: "timeout", Lesson: "y"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM insights`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rows after aging, %v; want 1", n, err)
	}
}

// TestInsightsAreBounded replays a break: an insight row was kept per
// fresh tool name (20 per tool, tools unbounded, and client tools' names
// are the caller's to choose). The insights of one owner, and all of them,
// are capped now; the most seen, then the latest, stay.
func TestInsightsAreBounded(t *testing.T) {
	both(t, func(t *testing.T, path string) {
		ctx := t.Context()
		s := openTest(t, path, Options{})
		record := func(owner string, tools int) {
			var ins []Insight
			for i := range tools {
				ins = append(ins, Insight{Owner: owner, Tool: fmt.Sprintf("fresh_tool_%d", i), Key: "k", Kind: "tool_error", Lesson: "failed"})
			}
			if err := s.RecordInsights(ctx, ins...); err != nil {
				t.Fatal(err)
			}
		}
		// At the default caps: one owner's fresh tools.
		record("static:z", MaxInsightsPerOwner+100)
		if z, err := s.Insights(ctx, InsightQuery{Scope: OwnerScope("static:z")}); err != nil || len(z) != MaxInsightsPerOwner {
			t.Errorf("%d insights kept for one owner's %d fresh tools (%v), want %d", len(z), MaxInsightsPerOwner+100, err, MaxInsightsPerOwner)
		}
		if _, err := s.ClearInsights(ctx, Scope{}); err != nil {
			t.Fatal(err)
		}
		s.insightCaps.perOwner, s.insightCaps.total = 50, 120
		record("static:a", 80)
		if err := s.RecordInsights(ctx, Insight{Owner: "static:a", Tool: "fresh_tool_0", Key: "k", Kind: "tool_error", Lesson: "seen again"}); err != nil {
			t.Fatal(err)
		}
		mine, err := s.Insights(ctx, InsightQuery{Scope: OwnerScope("static:a")})
		if err != nil {
			t.Fatal(err)
		}
		if len(mine) != 50 || mine[0].Tool != "fresh_tool_0" || mine[0].Count != 2 {
			t.Errorf("one owner's insights: %d, the first %+v; want 50, the most seen first", len(mine), mine[0])
		}
		for _, o := range []string{"static:b", "static:c", "static:d"} {
			record(o, 50)
		}
		all, err := s.Insights(ctx, InsightQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 120 {
			t.Errorf("%d insights kept in all, want the cap of 120", len(all))
		}
		// Pages cover them all, each once.
		seen := map[string]bool{}
		for off := 0; ; off += 7 {
			page, err := s.Insights(ctx, InsightQuery{Limit: 7, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range page {
				seen[in.Owner+in.Tool] = true
			}
			if len(page) < 7 {
				break
			}
		}
		if len(seen) != 120 {
			t.Errorf("pages of 7 showed %d insights, want 120", len(seen))
		}
	})
}
