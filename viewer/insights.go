package viewer

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/orchestra-mcp/orchestra/store"
)

// toolInsights is one tool of the insights page.
type toolInsights struct {
	Tool, URL string
	Count     int // insights
	Seen      int // times seen, all insights together
	LastSeen  time.Time
	Kinds     []string
}

type insightsPage struct {
	Tools []toolInsights
}

// insightsPage lists the tools the caller's runs taught something about.
func (v *Viewer) insightsPage(w http.ResponseWriter, r *http.Request, id Identity) {
	ins, err := v.opts.Records.Insights(r.Context(), store.InsightQuery{Scope: id.Scope})
	if err != nil {
		v.readFailed(w, r, "insights", err)
		return
	}
	byTool := map[string]*toolInsights{}
	for _, in := range ins {
		t := byTool[in.Tool]
		if t == nil {
			t = &toolInsights{Tool: in.Tool, URL: v.prefix + "insights/" + url.PathEscape(in.Tool)}
			byTool[in.Tool] = t
		}
		t.Count++
		t.Seen += in.Count
		if in.LastSeen.After(t.LastSeen) {
			t.LastSeen = in.LastSeen
		}
		if !slices.Contains(t.Kinds, in.Kind) {
			t.Kinds = append(t.Kinds, in.Kind)
		}
	}
	var page insightsPage
	for _, t := range byTool {
		page.Tools = append(page.Tools, *t)
	}
	slices.SortFunc(page.Tools, func(a, b toolInsights) int {
		if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
			return c
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	v.render(w, r, http.StatusOK, "insights", page, id)
}

type toolPage struct {
	Tool     string
	Insights []store.Insight
}

func (p toolPage) title() string { return "Insights: " + p.Tool }

// toolPage lists the insights about one tool.
func (v *Viewer) toolPage(w http.ResponseWriter, r *http.Request, id Identity) {
	tool := r.PathValue("tool")
	if err := checkID("tool name", tool, maxToolName); err != nil {
		v.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ins, err := v.opts.Records.Insights(r.Context(), store.InsightQuery{Scope: id.Scope, Tools: []string{tool}})
	if err != nil {
		v.readFailed(w, r, "insights", err)
		return
	}
	v.render(w, r, http.StatusOK, "tool", toolPage{Tool: tool, Insights: ins}, id)
}
