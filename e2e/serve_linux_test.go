//go:build linux

package e2e

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// servedHTTP is an orchestra serve --http started by serveUnderLimit.
type servedHTTP struct {
	url    string        // its /mcp endpoint
	pid    int           // orchestra's own (prlimit runs it in its place)
	exited chan struct{} // closed once it has exited, with err set
	err    error         // what Wait returned
}

// serveUnderLimit starts orchestra serve --http on a loopback port, with
// the configuration config and the store in memory, under prlimit with
// limit (e.g. "--nofile=1024:1024"), and stops it when the test ends. It
// skips the test where prlimit is not installed.
func serveUnderLimit(t *testing.T, limit, config string) *servedHTTP {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit is not installed")
	}
	cfg := filepath.Join(t.TempDir(), "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prlimit, limit, orchestraBin, "serve", "--config", cfg, "--http", "127.0.0.1:0", "--store", "memory", "--log-level", "warn")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &servedHTTP{pid: cmd.Process.Pid, exited: make(chan struct{})}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "orchestra: serving MCP at "); ok {
			s.url = u
			break
		}
	}
	go func() {
		io.Copy(io.Discard, stderr)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-s.exited
	})
	if s.url == "" {
		t.Fatal("orchestra serve --http did not say where it serves")
	}
	return s
}

// alive reports whether the server has not exited.
func (s *servedHTTP) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}
