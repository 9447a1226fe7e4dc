//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSkippedLoopsUnderAddressSpaceCap replays, against orchestra serve
// --http run under a 4 GiB address-space limit, the attack that killed it:
// 64 concurrent 1 KB plans, half of them asking for the full response, of
// three nested 64×64 loops whose bodies a condition skips. Before, they
// built 168–265 MB of responses and records, the process's resident memory
// passed 2 GB and, with "full", it died. Now a skipped iteration is
// neither copied nor recorded: every plan is answered, the process lives
// and serves the next client, and its peak resident memory stays under
// 1 GiB.
func TestSkippedLoopsUnderAddressSpaceCap(t *testing.T) {
	// One client sends all 64 at once: every plan gets a slot, and the
	// rate limit lets them through.
	srv := serveUnderLimit(t, "--as=4294967296", "limits:\n  plans_per_owner: 64\nserver:\n  rate_limit:\n    requests_per_second: -1\n")
	url := srv.url

	items := "[" + strings.TrimSuffix(strings.Repeat("0,", 64), ",") + "]"
	loop := func(id string) string {
		return `{"id":"` + id + `","for_each":"$l.output.result","as":"x","do":{"for_each":"$l.output.result","as":"y","do":{"tool":"render","when":"$bindings.no","arguments":{"template":"never"}}}}`
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // only a bound on a hang
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for i := range 64 {
		response := "compact"
		if i%2 == 1 {
			response = "full"
		}
		doc := `{"response":"` + response + `","bindings":{"no":false},"plan":{"steps":[{"id":"l","tool":"json_query","arguments":{"query":".","input":` + items + `}},` + loop("a") + `,` + loop("b") + `,` + loop("c") + `]}}`
		if i == 0 {
			t.Logf("each plan is %d bytes", len(doc))
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(doc), &args); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: args})
			if err != nil {
				t.Errorf("plan %d: %v", i, err)
				return
			}
			if res.IsError {
				t.Errorf("plan %d failed", i)
				return
			}
			mu.Lock()
			answered++
			mu.Unlock()
		})
	}
	wg.Wait()
	if !srv.alive() {
		t.Fatalf("orchestra died under the 4 GiB limit: %v", srv.err)
	}
	peak := peakRSS(t, srv.pid)
	t.Logf("%d of 64 plans answered; peak resident memory %d MiB", answered, peak>>20)
	if answered != 64 {
		t.Errorf("%d of 64 plans answered", answered)
	}
	if peak > 1<<30 {
		t.Errorf("peak resident memory %d MiB", peak>>20)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "agent_orchestrate", Arguments: map[string]any{"plan": map[string]any{"steps": []any{
		map[string]any{"tool": "render", "arguments": map[string]any{"template": "still served"}},
	}}}})
	if err != nil || res.IsError {
		t.Fatalf("a plan after the attack: %v", err)
	}
}

// peakRSS reads the peak resident memory of process pid (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("reading the process's status: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in the process's status")
	return 0
}
