package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// TestE2EStdio runs the built binary as a stdio MCP server and checks it
// through an SDK client session, in both protocol versions. The probe is
// http_request calling a test HTTP server that counts its requests.
func TestE2EStdio(t *testing.T) {
	var calls atomic.Int64
	probeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"label": r.URL.Query().Get("label")})
	}))
	defer probeSrv.Close()

	cfg := filepath.Join(t.TempDir(), "orchestra.yaml")
	if err := os.WriteFile(cfg, []byte("builtins:\n  http_request:\n    allowed_hosts: [\"127.0.0.1\"]\n    allow_private_networks: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	probe := servertest.Probe{
		Tool: "http_request",
		Args: func(label string) map[string]any {
			return map[string]any{"url": probeSrv.URL + "/probe", "query": map[string]any{"label": label}}
		},
		LabelPath: ".json.label",
		Calls:     func() int { return int(calls.Load()) },
	}

	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			var stderr servertest.SyncBuffer
			cmd := exec.Command(orchestraBin, "serve", "--config", cfg)
			cmd.Stderr = &stderr
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "test"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connecting to orchestra serve: %v\nstderr:\n%s", err, stderr.String())
			}
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Errorf("negotiated protocol version %s, want %s", got, version)
			}
			servertest.Run(t, cs, probe)
			if err := cs.Close(); err != nil {
				t.Errorf("closing the session: %v", err)
			}
			if cmd.ProcessState == nil || !cmd.ProcessState.Exited() {
				t.Errorf("orchestra serve is still running after the session closed")
			} else if code := cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("orchestra serve exited with %d\nstderr:\n%s", code, stderr.String())
			}
			if s := stderr.String(); strings.Contains(s, "panic") {
				t.Errorf("orchestra serve panicked:\n%s", s)
			}
		})
	}
}
