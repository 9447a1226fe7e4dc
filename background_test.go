package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
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
	node, err := exec.LookPath("node")
	clients, _ := filepath.Abs(filepath.Join("testdata", "clients"))
	if _, serr := os.Stat(filepath.Join(clients, "node_modules", "@modelcontextprotocol", "sdk")); serr != nil || err != nil {
		if os.Getenv("ORCHESTRA_REQUIRE_NPM") != "" {
			t.Fatal("the TypeScript clients are not installed: run `npm ci` in testdata/clients")
		}
		t.Skip("the TypeScript clients are not installed: run `npm ci` in testdata/clients")
	}
	if testing.Short() {
		t.Skip("a 90 s plan")
	}
	dir, cfg := buildFixture(t, "limits:\n  plan_timeout: 10m\n")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // bounds a hang
	defer cancel()
	target, _ := json.Marshal([]string{orchestraBin, "serve", "--config", cfg, "--store", filepath.Join(dir, "bg.db")})
	cmd := exec.CommandContext(ctx, node, filepath.Join(clients, "background.mjs"), string(target), "30000")
	cmd.Dir = clients
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var r struct {
		OK     bool     `json:"ok"`
		Checks []string `json:"checks"`
		Error  string   `json:"error"`
	}
	if err := json.Unmarshal(out, &r); err != nil || !r.OK {
		t.Fatalf("%s", out)
	}
	for _, c := range r.Checks {
		t.Log(c)
	}
}
