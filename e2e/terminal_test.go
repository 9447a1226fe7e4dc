package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/orchestra-mcp/orchestra/testutil/termtest"
)

// terminalEnv is the environment of a command on a capable terminal.
func terminalEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "NO_COLOR=") {
			env = append(env, kv)
		}
	}
	return append(env, "TERM=xterm-256color")
}

// runningRE finds a running step's row and its elapsed time: "⠙ left
// fx__gate running 1.2s".
var runningRE = regexp.MustCompile(`\s(\w+)\s+fx__gate\s+running\s+(?:(\d+)ms|(\d+\.\d)s|(\d+)m(\d\d)s)`)

// runningSteps returns the elapsed time of each step the screen shows
// running.
func runningSteps(screen *termtest.Screen) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, l := range screen.Lines() {
		m := runningRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var d time.Duration
		switch {
		case m[2] != "":
			ms, _ := strconv.Atoi(m[2])
			d = time.Duration(ms) * time.Millisecond
		case m[3] != "":
			s, _ := strconv.ParseFloat(m[3], 64)
			d = time.Duration(s * float64(time.Second))
		default:
			mins, _ := strconv.Atoi(m[4])
			secs, _ := strconv.Atoi(m[5])
			d = time.Duration(mins)*time.Minute + time.Duration(secs)*time.Second
		}
		out[m[1]] = d
	}
	return out
}

// terminalRun is a command running under a pseudo-terminal: its stdin
// and stderr are the terminal, its stdout a buffer.
type terminalRun struct {
	cmd    *exec.Cmd
	screen *termtest.Screen
	raw    bytes.Buffer // what it wrote to the terminal; read once copied is closed
	stdout bytes.Buffer
	copied chan struct{} // closed when the terminal closed
	exited chan struct{} // closed when the command exited, with err set
	err    error
}

// startOnTerminal starts orchestra with args, in env, on a terminal of 40
// rows of 120 columns; it skips the test where no pseudo-terminal opens.
func startOnTerminal(t *testing.T, env []string, args ...string) *terminalRun {
	t.Helper()
	r := &terminalRun{cmd: exec.Command(orchestraBin, args...), screen: &termtest.Screen{},
		copied: make(chan struct{}), exited: make(chan struct{})}
	r.cmd.Env = env
	r.cmd.Stdout = &r.stdout
	ptmx, err := pty.StartWithSize(r.cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.exited
		ptmx.Close()
	})
	go func() {
		defer close(r.copied)
		io.Copy(io.MultiWriter(r.screen, &r.raw), ptmx) // until the command exits and the terminal closes
	}()
	go func() {
		defer close(r.exited)
		r.err = r.cmd.Wait()
	}()
	return r
}

// wait waits for the command to exit and its terminal to be read to the
// end; the deadline only bounds a hang.
func (r *terminalRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("orchestra %s did not end\nscreen:\n%s", strings.Join(r.cmd.Args[1:], " "), r.screen)
	}
	if r.err != nil {
		t.Fatalf("orchestra %s: %v\nscreen:\n%s", strings.Join(r.cmd.Args[1:], " "), r.err, r.screen)
	}
	<-r.copied
}

// gatedRE finds a gated step's row once the fixture's progress report
// reached it: its bar and the report.
var gatedRE = regexp.MustCompile(`\s(left|right)\s+fx__gate\s+running\s+\S+\s+\[[^\]]+\]\s+1/2 waiting for the gate`)

// TestRunOnATerminal runs `orchestra run` under a pseudo-terminal on a
// plan with a parallel group of two slow steps of the fixture server (they
// end when the test opens their gate), and reads the screen while it
// runs: both steps are shown running, side by side, with elapsed times
// that grow and the bar of the progress the server reported; then every
// step's final status, and the summary. Standard output stays exactly the
// envelope. On a dumb terminal, or with NO_COLOR, the same run writes
// plain lines; without a terminal it writes no cursor control: nothing of
// the view by default, and plain lines with --progress always.
func TestRunOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir, cfg := buildFixture(t, "")
	gate := filepath.Join(dir, "open")
	planFile := filepath.Join(dir, "plan.json")
	plan := fmt.Sprintf(`{"plan": {"steps": [
		{"id": "first", "tool": "fx__echo", "arguments": {"text": "hi"}},
		{"id": "both", "parallel": [
			{"id": "left", "tool": "fx__gate", "arguments": {"path": %q}},
			{"id": "right", "tool": "fx__gate", "arguments": {"path": %q}}]},
		{"id": "last", "tool": "fx__echo", "arguments": {"text": "bye"}}]}}`, gate, gate)
	if err := os.WriteFile(planFile, []byte(plan), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--config", cfg, "--store", "memory", planFile}

	r := startOnTerminal(t, terminalEnv(), args...)
	screen := r.screen
	// Both gated steps show as running with their progress bars, and each
	// one's elapsed time grows.
	first := map[string]time.Duration{}
	grown := map[string]bool{}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // bounds a hang only
	defer cancel()
	go func() {
		select {
		case <-r.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := screen.Wait(ctx, func() bool {
		for step, d := range runningSteps(screen) {
			if d0, seen := first[step]; !seen {
				first[step] = d
			} else if d > d0 {
				grown[step] = true
			}
		}
		bars := map[string]bool{}
		for _, l := range screen.Lines() {
			if m := gatedRE.FindStringSubmatch(l); m != nil {
				bars[m[1]] = true
			}
		}
		return grown["left"] && grown["right"] && bars["left"] && bars["right"]
	})
	if err != nil {
		select {
		case <-r.exited:
			t.Fatalf("orchestra run exited (%v) before the screen showed both steps running\nscreen:\n%s", r.err, screen)
		default:
		}
		t.Fatalf("the screen never showed left and right running with their progress and growing elapsed times (seen first %v)\nscreen:\n%s", first, screen)
	}

	// Open the gate: the steps end, the run with them.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	for _, want := range []string{
		`✓ plan\s+success\s+\S+\s+4 of 4 tool steps done`,
		`✓ first\s+fx__echo\s+success`,
		`✓ both\s+parallel group\s+success\s+\S+\s+2 of 2 done`,
		`✓ {3}left\s+fx__gate\s+success`,
		`✓ {3}right\s+fx__gate\s+success`,
		`✓ last\s+fx__echo\s+success`,
		`Plan success: 4 of 4 tool steps succeeded`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(screen.String()) {
			t.Errorf("the last screen has no line matching %q", want)
		}
	}
	if strings.Contains(screen.String(), "running") {
		t.Errorf("the last screen still shows a step running")
	}
	if screen.Controls() == 0 {
		t.Error("the view never moved the cursor")
	}
	if t.Failed() {
		t.Logf("screen:\n%s", screen)
	}
	checkEnvelope(t, r.stdout.Bytes())

	// A terminal that cannot move its cursor, or a user who asked for
	// plain output: plain lines, not one control sequence.
	for _, kv := range []string{"TERM=dumb", "NO_COLOR=1"} {
		env := terminalEnv()
		if kv == "TERM=dumb" {
			env = append(env[:len(env)-1], kv)
		} else {
			env = append(env, kv)
		}
		r := startOnTerminal(t, env, args...)
		r.wait(t)
		if i := bytes.IndexByte(r.raw.Bytes(), 0x1b); i >= 0 {
			t.Errorf("%s: the terminal was written a control sequence at byte %d:\n%q", kv, i, r.raw.String())
		}
		for _, want := range []string{"left (fx__gate) success in", "right (fx__gate) success in", "] plan success in", "Plan success: 4 of 4 tool steps succeeded"} {
			if _, ok := r.screen.Find(want); !ok {
				t.Errorf("%s: no line with %q:\n%s", kv, want, r.screen)
			}
		}
		checkEnvelope(t, r.stdout.Bytes())
	}

	// Without a terminal: the view is off by default, plain with always.
	for _, progress := range []string{"auto", "always"} {
		cmd := exec.Command(orchestraBin, "run", "--config", cfg, "--store", "memory", "--progress", progress, planFile)
		cmd.Env = terminalEnv()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("--progress %s without a terminal: %v\n%s", progress, err, stderr.String())
		}
		if bytes.IndexByte(stderr.Bytes(), 0x1b) >= 0 {
			t.Errorf("--progress %s without a terminal wrote a control sequence:\n%q", progress, stderr.String())
		}
		plain := strings.Contains(stderr.String(), "left (fx__gate) success in")
		if plain != (progress == "always") {
			t.Errorf("--progress %s without a terminal: plain lines %v, want %v:\n%s", progress, plain, progress == "always", stderr.String())
		}
		checkEnvelope(t, stdout.Bytes())
	}
}

// checkEnvelope fails unless out is exactly one JSON value, a successful
// envelope.
func checkEnvelope(t *testing.T, out []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var env struct {
		Artifact struct {
			Status string `json:"status"`
		} `json:"artifact"`
	}
	if err := dec.Decode(&env); err != nil || env.Artifact.Status != "success" {
		t.Fatalf("stdout is not a successful envelope (%v):\n%.500s", err, out)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) > 0 || dec.More() || bytes.IndexByte(out, 0x1b) >= 0 {
		t.Fatalf("stdout holds more than the envelope:\n%q", out)
	}
}
