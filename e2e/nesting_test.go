package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// TestNesting chains three orchestra processes, each the downstream server
// of the one before: client → a → b → c. The depth travels in the request
// _meta, so the chain runs to the bottom under max_depth 3 and stops with
// depth_exceeded under max_depth 2; no process outlives the client.
func TestNesting(t *testing.T) {
	for _, tc := range []struct {
		maxDepth int
		wantOK   bool
	}{{3, true}, {2, false}} {
		t.Run(fmt.Sprintf("max_depth=%d", tc.maxDepth), func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, body string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			limits := fmt.Sprintf("limits:\n  max_depth: %d\n", tc.maxDepth)
			c := write("c.yaml", limits)
			b := write("b.yaml", limits+fmt.Sprintf("mcpServers:\n  c:\n    command: %q\n    args: [serve, --config, %q]\n", orchestraBin, c))
			a := write("a.yaml", limits+fmt.Sprintf("mcpServers:\n  b:\n    command: %q\n    args: [serve, --config, %q]\n", orchestraBin, b))

			cmd := exec.Command(orchestraBin, "serve", "--config", a)
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			innermost := map[string]any{"plan": map[string]any{"steps": []any{
				map[string]any{"tool": "render", "arguments": map[string]any{"template": "bottom reached", "values": map[string]any{}}},
			}}}
			middle := map[string]any{"plan": map[string]any{"steps": []any{
				map[string]any{"tool": "c__agent_orchestrate", "arguments": innermost},
			}}}
			top := map[string]any{"plan": map[string]any{"steps": []any{
				map[string]any{"tool": "b__agent_orchestrate", "arguments": middle},
			}}}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: orchestrate.ToolName, Arguments: top})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(res.StructuredContent)
			text := string(data)
			if tc.wantOK {
				if res.IsError || !strings.Contains(text, `"text":"bottom reached"`) {
					t.Errorf("the chain a → b → c did not run to the bottom:\n%s", text)
				}
			} else {
				if !res.IsError || !strings.Contains(text, string(orchestrate.CodeDepthExceeded)) || strings.Contains(text, `"text":"bottom reached"`) {
					t.Errorf("want the third orchestra to refuse with depth_exceeded:\n%s", text)
				}
			}
			cs.Close()
			// Closing the client ends a, which ends b, which ends c.
			waitNoProcess(t, dir)
		})
	}
}

// waitNoProcess fails the test when a process whose command line mentions
// dir is still running after a bounded wait.
func waitNoProcess(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := processesMentioning(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes outlived the chain: %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		// Zombies are gone for our purpose.
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestNestingDirectCalls chains four orchestra processes and calls the
// last one's agent_orchestrate through the others' exposed tools directly
// (l2__l3__l4__agent_orchestrate on the first): each hop carries the depth
// one further, so under max_depth 3 the fourth refuses with depth_exceeded,
// and under max_depth 4 the plan runs.
func TestNestingDirectCalls(t *testing.T) {
	for _, tc := range []struct {
		maxDepth int
		wantOK   bool
	}{{4, true}, {3, false}} {
		t.Run(fmt.Sprintf("max_depth=%d", tc.maxDepth), func(t *testing.T) {
			dir := t.TempDir()
			limits := fmt.Sprintf("limits:\n  max_depth: %d\n", tc.maxDepth)
			next := ""
			for i := 4; i >= 1; i-- {
				body := limits
				if next != "" {
					body += fmt.Sprintf("mcpServers:\n  l%d:\n    command: %q\n    args: [serve, --config, %q]\n", i+1, orchestraBin, next)
				}
				next = filepath.Join(dir, fmt.Sprintf("l%d.yaml", i))
				if err := os.WriteFile(next, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: exec.Command(orchestraBin, "serve", "--config", next)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			args := map[string]any{"plan": map[string]any{"steps": []any{
				map[string]any{"tool": "render", "arguments": map[string]any{"template": "bottom reached", "values": map[string]any{}}},
			}}}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "l2__l3__l4__agent_orchestrate", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(res)
			text := string(data)
			if tc.wantOK {
				if res.IsError || !strings.Contains(text, `bottom reached`) {
					t.Errorf("the direct chain did not run to the bottom:\n%s", text)
				}
			} else if !res.IsError || !strings.Contains(text, string(orchestrate.CodeDepthExceeded)) || strings.Contains(text, `\"text\":\"bottom reached`) {
				t.Errorf("want the fourth orchestra to refuse with depth_exceeded:\n%s", text)
			}
			cs.Close()
			waitNoProcess(t, dir)
		})
	}
}
