package server

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/store"
)

// TestInsightsResourcePages: orchestra://insights is a page of the most
// seen lessons with the URI of the next; following it reads each lesson
// once; a bad cursor is an invalid-params error saying where to start.
func TestInsightsResourcePages(t *testing.T) {
	app, err := New(t.Context(), config.Default(), Options{Version: "test", Store: "memory"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	var ins []store.Insight
	for i := range 230 {
		ins = append(ins, store.Insight{Tool: fmt.Sprintf("tool_%03d", i), Key: "k", Kind: "tool_error", Lesson: "lesson"})
	}
	if err := app.store.RecordInsights(t.Context(), ins...); err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	if _, err := app.Server.Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	seen := map[string]bool{}
	uri, pages := InsightsURI, 0
	for uri != "" {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		var page InsightsPage
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Insights) > DefaultInsightsPage {
			t.Errorf("a page of %d insights, more than %d", len(page.Insights), DefaultInsightsPage)
		}
		for _, in := range page.Insights {
			if seen[in.Tool] {
				t.Errorf("%s listed twice", in.Tool)
			}
			seen[in.Tool] = true
		}
		uri = page.Next
		pages++
	}
	if len(seen) != 230 || pages != 3 {
		t.Errorf("%d insights in %d pages, want 230 in 3", len(seen), pages)
	}
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: InsightsURI + "?cursor=oops"}); err == nil {
		t.Error("a made-up cursor was read")
	}
}
