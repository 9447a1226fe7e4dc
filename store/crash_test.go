package store

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	helperEnv   = "ORCHESTRA_STORE_HELPER"
	helperDBEnv = "ORCHESTRA_STORE_HELPER_DB"
)

// TestHelperProcess is not a test: run as a child by TestCrashRecovery, it
// opens the store, starts a run, records a step, says "ready" on stdout, and
// keeps recording steps until it is killed.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestCrashRecovery")
	}
	ctx := t.Context()
	s, err := Open(ctx, os.Getenv(helperDBEnv), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	if err := s.StartRun(ctx, Run{ExecID: "crashing", Tool: "agent_orchestrate", StepCount: 2,
		Plan: json.RawMessage(`{"steps":[{"id":"first"},{"id":"second"}]}`)}); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(2)
	}
	if err := s.RecordStep(ctx, StepRecord{ExecID: "crashing", StepID: "first", Tool: "echo",
		Status: "success", Attempts: 1, Output: json.RawMessage(`{"text":"done"}`)}); err != nil {
		fmt.Fprintln(os.Stderr, "step:", err)
		os.Exit(2)
	}
	if err := s.RecordStep(ctx, StepRecord{ExecID: "crashing", StepID: "second", Index: 1, Tool: "echo",
		Status: "running", StartedAt: time.Now()}); err != nil {
		fmt.Fprintln(os.Stderr, "step:", err)
		os.Exit(2)
	}
	fmt.Println("ready")
	// Keep writing, so the kill lands in the middle of transactions.
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", 64<<10) + `"}`)
	for i := 0; ; i++ {
		if err := s.RecordStep(ctx, StepRecord{ExecID: "crashing", StepID: fmt.Sprint("busy", i%50), Index: 2,
			Tool: "echo", Status: "running", Output: big}); err != nil {
			fmt.Fprintln(os.Stderr, "busy step:", err)
			os.Exit(2)
		}
	}
}

// TestCrashRecovery kills a process mid-run with SIGKILL and checks that the
// database opens cleanly afterwards with the run marked interrupted.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := tempDB(t)
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperDBEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, %v; stderr:\n%s", line, err, stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Success() {
		t.Fatalf("child ended with %v, want killed; stderr:\n%s", err, stderr.String())
	}
	if st := cmd.ProcessState.String(); !strings.Contains(st, "killed") {
		t.Logf("child state: %s", st)
	}

	ctx := t.Context()
	s := openTest(t, path, Options{})
	var check string
	if err := s.writer.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check = %q, %v", check, err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Recovered != 1 {
		t.Errorf("Recovered = %d, want 1", st.Recovered)
	}
	run, steps, err := s.Get(ctx, "crashing")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusInterrupted || run.Error == "" || !run.FinishedAt.IsZero() {
		t.Errorf("run after crash: status %q, error %q, finished %v", run.Status, run.Error, run.FinishedAt)
	}
	if string(run.Plan) != `{"steps":[{"id":"first"},{"id":"second"}]}` {
		t.Errorf("plan after crash: %s", run.Plan)
	}
	byID := map[string]StepRecord{}
	for _, s := range steps {
		byID[s.StepID] = s
	}
	if got := byID["first"]; got.Status != "success" || string(got.Output) != `{"text":"done"}` {
		t.Errorf("finished step after crash: %+v", got)
	}
	if got := byID["second"].Status; got != "interrupted" {
		t.Errorf("running step after crash: status %q, want interrupted", got)
	}
	// The dead process's lock file is cleaned up.
	entries, err := os.ReadDir(instanceDir(s.path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != s.instance+".lock" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("owner lock files %v, want only this store's", names)
	}
}
