package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// TestTSClientBackgroundRun: a TypeScript SDK client with its default 60 s
// request timeout starts a 90 s plan (three 30 s sleeps of the fixture
// server) in the background and sees it through: the first answer says
// running, awaits return growing progress, the last the final envelope,
// and its subscription to the record was served (testdata/clients/
// background.mjs). Without background runs the plan's own call would
// fail at the client's timeout.
func TestTSClientBackgroundRun(t *testing.T) {
	t.Parallel() // it waits, mostly
	node, clients := tsClients(t)
	if testing.Short() {
		t.Skip("a 90 s plan")
	}
	dir, cfg := buildFixture(t, "limits:\n  plan_timeout: 10m\n")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // bounds a hang
	defer cancel()
	target, _ := json.Marshal([]string{orchestraBin, "serve", "--config", cfg, "--store", filepath.Join(dir, "bg.db")})
	runTSClient(ctx, t, node, clients, "background.mjs", string(target), "30000")
}
