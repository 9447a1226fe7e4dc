package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

// TestInsightsPages: orchestra insights lists a page at a time (--limit)
// and says how to get the next (--cursor); the pages hold every insight
// once, as text and as JSON.
func TestInsightsPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orchestra.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ins []store.Insight
	for i := range 25 {
		ins = append(ins, store.Insight{Tool: fmt.Sprintf("tool_%02d", i), Key: "k", Kind: "tool_error", Lesson: "lesson"})
	}
	if err := st.RecordInsights(t.Context(), ins...); err != nil {
		t.Fatal(err)
	}
	st.Close()

	run := func(args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), append([]string{"insights", "--store", path}, args...), strings.NewReader(""), &stdout, &stderr); code != ExitOK {
			t.Fatalf("insights %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	next := regexp.MustCompile(`--cursor (\S+)`)
	seen := map[string]bool{}
	var args []string
	for pages := 0; ; pages++ {
		out, errOut := run(append([]string{"--limit", "10"}, args...)...)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			seen[strings.Fields(line)[0]] = true
		}
		m := next.FindStringSubmatch(errOut)
		if m == nil {
			if pages != 2 {
				t.Errorf("%d pages of 10 for 25 insights, want 3", pages+1)
			}
			break
		}
		args = []string{"--cursor", m[1]}
	}
	if len(seen) != 25 {
		t.Errorf("the pages listed %d tools, want 25", len(seen))
	}
	out, _ := run("--limit", "20", "--json")
	var page server.InsightsPage
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Insights) != 20 || page.Next == "" {
		t.Errorf("a JSON page: %v, %d insights, next %q", err, len(page.Insights), page.Next)
	}
}
