package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/pgtest"
)

// TestBackgroundAcrossReplicas runs two `orchestra serve --http
// --stateless` on one PostgreSQL database.
//
// A cancel asked on replica b of a background run that replica a runs
// reaches a: the run ends cancelled, and a's await returns its final
// envelope.
//
// Replica a runs a background plan of five steps — tally, tally, a gate
// the test holds closed, tally, tally — and is SIGKILLed once step 2's
// success is recorded, with step 3 in flight. Replica b takes the run up
// once a's lease lapsed and finishes it; the counting fixture shows that
// steps 1 and 2 ran once, and b's await returns the final envelope.
func TestBackgroundAcrossReplicas(t *testing.T) {
	log := replicasLog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // bounds a hang only
	defer cancel()
	dir := t.TempDir()
	cluster, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	dbURL, err := cluster.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const lease = 2 * time.Second
	bin, cfg, err := buildReplicas(ctx, dir, "../..", "", dbURL, lease)
	if err != nil {
		t.Fatal(err)
	}
	var rs [2]*replica
	var cs [2]*mcp.ClientSession
	for i := range rs {
		if rs[i], err = startReplica(ctx, bin, cfg, log); err != nil {
			t.Fatal(err)
		}
		defer rs[i].stop()
		if cs[i], err = connectReplica(ctx, rs[i].url); err != nil {
			t.Fatal(err)
		}
		defer cs[i].Close()
	}
	reader, err := store.Open(ctx, dbURL, store.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// waitFor reads the store until cond holds: the replicas write it,
	// and no answer tells when.
	waitFor := func(t *testing.T, what string, cond func() bool) {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
		}
	}

	t.Run("cancel on another replica", func(t *testing.T) {
		gate := filepath.Join(dir, "never")
		id := startBackground(ctx, t, cs[0], []any{
			map[string]any{"id": "wait", "tool": "fx__gate", "arguments": map[string]any{"path": gate}},
		})
		env := orchestrateCall(ctx, t, cs[1], map[string]any{"cancel": map[string]any{"exec_id": id}})
		if env.Artifact.Status != "running" {
			t.Fatalf("cancel on b: status %q, want running (the run is a's): %s", env.Artifact.Status, env.raw)
		}
		env = orchestrateCall(ctx, t, cs[0], map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 60000}})
		if env.Artifact.Status == "running" || env.Artifact.Status == "success" {
			t.Fatalf("await on a after b's cancel: status %q: %s", env.Artifact.Status, env.raw)
		}
		if st := env.step("wait"); st != "cancelled" {
			t.Errorf("the gate step is %q, want cancelled: %s", st, env.raw)
		}
	})

	t.Run("takeover after SIGKILL", func(t *testing.T) {
		tally, gate := filepath.Join(dir, "tally"), filepath.Join(dir, "gate")
		count := func(name string) map[string]any {
			return map[string]any{"id": name, "tool": "fx__tally", "arguments": map[string]any{"file": tally, "name": name}}
		}
		id := startBackground(ctx, t, cs[0], []any{
			count("s1"), count("s2"),
			map[string]any{"id": "s3", "tool": "fx__gate", "arguments": map[string]any{"path": gate}},
			count("s4"), count("s5"),
		})
		waitFor(t, "step 2's success in the record", func() bool {
			_, steps, err := reader.Get(ctx, id)
			if err != nil {
				return false
			}
			for _, s := range steps {
				if s.StepID == "s2" && s.Status == "success" {
					return true
				}
			}
			return false
		})
		rs[0].kill()
		// The step in flight at the kill runs again on b: let it through.
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "b to take the run up", func() bool {
			evs, err := reader.Pauses(ctx, id)
			return err == nil && len(evs) > 0 && evs[len(evs)-1].Event == "resumed"
		})
		env := orchestrateCall(ctx, t, cs[1], map[string]any{"await": map[string]any{"exec_id": id, "timeout_ms": 60000}})
		if env.Artifact.Status != "success" {
			t.Fatalf("await on b: status %q, want success: %s", env.Artifact.Status, env.raw)
		}
		for _, s := range []string{"s1", "s2", "s3", "s4", "s5"} {
			if st := env.step(s); st != "success" {
				t.Errorf("step %s is %q, want success", s, st)
			}
		}
		data, err := os.ReadFile(tally)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Fields(string(data)), []string{"s1", "s2", "s4", "s5"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the tally is %v, want %v: each counted step ran once", got, want)
		}
		// The record's end is queued as the run ends, and may follow the answer.
		waitFor(t, "the record to say success", func() bool {
			run, _, err := reader.Get(ctx, id)
			return err == nil && run.Status == store.StatusSuccess
		})
	})
}

// envelope is what the tests read of an answer.
type envelope struct {
	Artifact struct {
		Status string `json:"status"`
		Steps  []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"steps"`
		Background *struct {
			ExecID string `json:"exec_id"`
		} `json:"background"`
	} `json:"artifact"`
	raw string
}

func (e *envelope) step(id string) string {
	for _, s := range e.Artifact.Steps {
		if s.ID == id {
			return s.Status
		}
	}
	return ""
}

func orchestrateCall(ctx context.Context, t *testing.T, cs *mcp.ClientSession, args map[string]any) *envelope {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	env := &envelope{raw: string(data)}
	if err := json.Unmarshal(data, env); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return env
}

// startBackground starts steps as a background plan and returns its exec id.
func startBackground(ctx context.Context, t *testing.T, cs *mcp.ClientSession, steps []any) string {
	t.Helper()
	env := orchestrateCall(ctx, t, cs, map[string]any{"background": true, "plan": map[string]any{"steps": steps}})
	if env.Artifact.Status != "running" || env.Artifact.Background == nil {
		t.Fatalf("starting a background run: %s", env.raw)
	}
	return env.Artifact.Background.ExecID
}
