package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/store"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestExecutionTimeline: `orchestra executions ID` lists a run's steps in
// plan order, indented under their group or loop, and draws each step
// that started as a bar whose offset and length follow its recorded start
// and duration on an axis of the run's duration; steps that ran side by
// side overlap, and a step that never started has no bar. The run's times
// are fixed, and the timeline compared with testdata/cli/timeline.golden
// (rewritten with -update).
func TestExecutionTimeline(t *testing.T) {
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "orchestra.db")
	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Every time is fixed from the run's start, recent enough to be kept
	// by the store's retention.
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if err := st.StartRun(ctx, store.Run{ExecID: "run-1", Tool: "cli", StartedAt: t0, StepCount: 6}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []store.StepRecord{
		// Read back by index and path: do[10] would come before do[2].
		{StepID: "fetch", Index: 0, Path: "plan.steps[0]", Kind: "tool", Tool: "fx__echo", Status: "success", StartedAt: at(0), DurationMS: 400, Attempts: 1},
		{StepID: "both", Index: 1, Path: "plan.steps[1]", Kind: "parallel", Status: "success", StartedAt: at(400), DurationMS: 3000},
		{StepID: "left", Index: 1, Path: "plan.steps[1].parallel[0]", Kind: "tool", Tool: "fx__sleep", Status: "success", StartedAt: at(400), DurationMS: 2000, Attempts: 1},
		{StepID: "right", Index: 1, Path: "plan.steps[1].parallel[1]", Kind: "tool", Tool: "fx__sleep", Status: "success", StartedAt: at(400), DurationMS: 3000, Attempts: 2},
		{StepID: "each", Index: 2, Path: "plan.steps[2]", Kind: "for_each", Status: "failed", StartedAt: at(3400), DurationMS: 1000},
		{StepID: "each[2]", Index: 2, Path: "plan.steps[2].do[2]", Kind: "tool", Tool: "fx__echo", Status: "success", StartedAt: at(3800), DurationMS: 200, Attempts: 1},
		{StepID: "each[10]", Index: 2, Path: "plan.steps[2].do[10]", Kind: "tool", Tool: "fx__fail", Status: "failed", StartedAt: at(4000), DurationMS: 400, Attempts: 1,
			Error: []byte(`{"code": "tool_error", "message": "it failed"}`)},
		{StepID: "never", Index: 3, Path: "plan.steps[3]", Kind: "tool", Tool: "fx__echo", Status: "skipped"},
	} {
		s.ExecID = "run-1"
		if err := st.RecordStep(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.FinishRun(ctx, "run-1", store.StatusFailed, []byte(`{"artifact": {"status": "failed", "errors": [{"code": "tool_error", "message": "it failed"}]}}`), at(5000), 6); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr strings.Builder
	if code := Run(ctx, []string{"executions", "--store", db, "run-1"}, strings.NewReader(""), &stdout, &stderr); code != ExitOK {
		t.Fatalf("executions exited %d: %s", code, stderr.String())
	}
	out := stdout.String()
	table, rest, ok := strings.Cut(out, "\ntimeline:")
	if !ok {
		t.Fatalf("no timeline:\n%s", out)
	}
	got := "timeline:" + rest[:strings.Index(rest, "\n\n")+1]
	golden := filepath.Join("testdata", "cli", "timeline.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("timeline (-want +got):\n%s\nrewrite it with: go test -run TestExecutionTimeline -update ./cli", diff)
	}
	var order []string
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 1 && (strings.HasPrefix(f[1], "fx__") || f[1] == "(group)") {
			order = append(order, f[0])
		}
	}
	if diff := cmp.Diff([]string{"fetch", "both", "left", "right", "each", "each[2]", "each[10]", "never"}, order); diff != "" {
		t.Errorf("the table's steps are not in plan order (-want +got):\n%s\n%s", diff, table)
	}
}
