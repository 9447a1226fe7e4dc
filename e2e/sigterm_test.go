//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestServeStdioSIGTERM sends SIGTERM to orchestra serve over stdio while
// a plan runs: after the shutdown grace the plan is cancelled, the client
// gets the partial answer, and the process exits.
func TestServeStdioSIGTERM(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixtureserver")
	if out, err := exec.Command("go", "build", "-o", fixture, "./testdata/fixtureserver").CombinedOutput(); err != nil {
		t.Fatalf("building the fixture server: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "orchestra.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("server:\n  shutdown_grace: 100ms\nmcpServers:\n  fx:\n    command: %q\n", fixture)), 0o644)
	cmd := exec.Command(orchestraBin, "serve", "--config", cfg, "--store", "memory")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"plan":{"steps":[{"id":"w","tool":"fx__sleep","arguments":{"ms":60000}}]}},"_meta":{"progressToken":"p"}}}`)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	signalled := false
	var answer map[string]any
	for sc.Scan() {
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		if !signalled && m["method"] == "notifications/progress" && strings.Contains(sc.Text(), "started") {
			cmd.Process.Signal(syscall.SIGTERM)
			signalled = true
		}
		if m["id"] == float64(2) {
			answer = m
		}
	}
	if err := waitExit(cmd, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	res, _ := answer["result"].(map[string]any)
	if res == nil || res["isError"] != true || !strings.Contains(fmt.Sprint(res["structuredContent"]), "cancelled") {
		t.Fatalf("want the running plan answered as cancelled, got %v", answer)
	}
}

// TestServeStdioSIGTERMWithStdoutFull has a client that stops reading
// stdout while the server writes: SIGTERM still ends the process.
func TestServeStdioSIGTERMWithStdoutFull(t *testing.T) {
	cmd := exec.Command(orchestraBin, "serve", "--store", "memory")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe() // never read
	defer stdout.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// Each tools/list answer is several KiB: far more than a pipe holds.
	go func() {
		for i := range 500 {
			if _, err := fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", 10+i); err != nil {
				return
			}
		}
	}()
	// Wait until the server is blocked on the full pipe: the pipe holds
	// most of its 64 KiB no one read, while far more is to be written.
	deadline := time.Now().Add(20 * time.Second)
	for unread(t, stdout) < 48<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the server's stdout never filled (%d bytes unread)", unread(t, stdout))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(cmd, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// unread returns how many bytes the pipe r holds that no one read.
func unread(t *testing.T, r io.Reader) int {
	f, ok := r.(*os.File)
	if !ok {
		t.Fatalf("stdout is a %T, not a pipe", r)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	raw.Control(func(fd uintptr) {
		syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	})
	return n
}

// waitExit waits up to d for cmd to exit.
func waitExit(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return nil
	case <-time.After(d):
		return fmt.Errorf("orchestra did not exit within %v of SIGTERM", d)
	}
}
