package server_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/registry/mcpserver"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/server/secrets"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// newLoggedApp builds an app whose log goes, redacted as the CLI's does,
// to the returned buffer.
func newLoggedApp(t *testing.T, cfg *config.Config) (*server.App, *servertest.SyncBuffer) {
	t.Helper()
	logs := &servertest.SyncBuffer{}
	log := slog.New(secrets.NewHandler(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}), secrets.Of(cfg)))
	app, err := server.New(t.Context(), cfg, server.Options{Version: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return app, logs
}

// everything returns what an app shows of itself: its log, the status of
// its downstream servers (what orchestra tools and tools --json print),
// and its execution records and their list.
func everything(t *testing.T, app *server.App, logs *servertest.SyncBuffer) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(logs.String())
	status, _ := json.Marshal(app.Downstream())
	b.Write(status)
	runs, _, err := app.Store().List(t.Context(), store.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		run, steps, err := app.Store().Get(t.Context(), r.ExecID)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(server.ExecutionOf(run, steps))
		b.Write(data)
		b.WriteString(r.Error)
	}
	return b.String()
}

// TestDownstreamEnvironmentIsMinimal: a stdio server used to inherit the
// whole environment, so a tool that prints it handed out the bearer
// tokens and API keys. It now gets PATH, HOME, the locale and the like,
// what its env sets, and only what inherit_env names beyond that.
func TestDownstreamEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_not-for-downstream-1")
	t.Setenv("ORCHESTRA_TEST_TOKENS", "bearer-not-for-downstream-2")
	t.Setenv("LANG", "C.UTF-8")
	for _, tt := range []struct {
		name    string
		inherit []string
		want    []string
		notWant []string
	}{
		{"minimal", nil, []string{"GIVEN=yes", "LANG=C.UTF-8", "ORCHESTRA_DEPTH=1", "PATH="}, []string{"ghp_not-for-downstream-1", "bearer-not-for-downstream-2"}},
		{"opted in", []string{"GITHUB_TOKEN"}, []string{"GITHUB_TOKEN=ghp_not-for-downstream-1"}, []string{"bearer-not-for-downstream-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.MCPServers = map[string]mcpserver.ServerConfig{"fx": {Command: fixture(t), Env: map[string]string{"GIVEN": "yes"}, InheritEnv: tt.inherit}}
			app := newApp(t, cfg)
			cs := connectInMemory(t, app, v20251125)
			_, env := servertest.Call(t, cs, map[string]any{"plan": map[string]any{"steps": []any{map[string]any{"tool": "fx__env"}}}}, nil)
			if !env.Artifact.Success {
				t.Fatalf("fx__env failed: %+v", env.Artifact.Errors)
			}
			out, _ := json.Marshal(env.Artifact.Steps[0].Output)
			for _, w := range tt.want {
				if !strings.Contains(string(out), `"`+w) {
					t.Errorf("the environment lacks %s: %s", w, out)
				}
			}
			for _, nw := range tt.notWant {
				if strings.Contains(string(out), nw) {
					t.Errorf("the environment holds %s: %s", nw, out)
				}
			}
		})
	}
}

// TestURLCredentialsRedacted: the user, password and query values of a
// downstream URL appear in no log line, no server status (orchestra
// tools, tools --json) and no record; and the query parameters that carry
// keys, tokens or signatures are cut out of any URL in what orchestra
// says, however short their values (too short to be cut out as known
// secrets).
func TestURLCredentialsRedacted(t *testing.T) {
	cfg := config.Default()
	cfg.MCPServers = map[string]mcpserver.ServerConfig{
		"web": {URL: "http://alice:pa55-w0rd-x@127.0.0.1:1/mcp?api_key=k3y-value-y&region=eu"},
		"api": {URL: "http://127.0.0.1:1/mcp?region=us-west&API_KEY=k3y&Token=t0k&X-Amz-Signature=s1g"},
	}
	app, logs := newLoggedApp(t, cfg)
	st := app.Downstream()
	if len(st) != 2 || st[0].Error == "" || st[1].Error == "" {
		t.Fatalf("status = %+v, want two failed servers", st)
	}
	got := everything(t, app, logs)
	for _, secret := range []string{"pa55-w0rd-x", "k3y-value-y", "alice", "=k3y", "=t0k", "=s1g"} {
		if strings.Contains(got, secret) {
			t.Errorf("a URL credential (%s) leaked:\n%s", secret, got)
		}
	}

	if !strings.Contains(st[0].Error, "127.0.0.1:1") {
		t.Errorf("the error no longer says which server: %s", st[0].Error)
	}
}

// TestProviderErrorRedacted: a model provider whose error body echoes the
// API key (as a 401 does) leaks it into no envelope, record or log.
func TestProviderErrorRedacted(t *testing.T) {
	const key = "sk-test-K3Y-only-for-this-test"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s. Authorization: %s","type":"invalid_request_error","code":"invalid_api_key"}}`, key, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	t.Setenv("ORCHESTRA_TEST_PLANNER_KEY", key)
	cfg := config.Default()
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "m", BaseURL: srv.URL + "/v1", APIKeyEnv: "ORCHESTRA_TEST_PLANNER_KEY"}}
	app, logs := newLoggedApp(t, cfg)
	cs := connectInMemory(t, app, v20251125)
	res, env := servertest.Call(t, cs, map[string]any{"prompt": "count the items"}, nil)
	if env.Artifact.Success {
		t.Fatal("the plan succeeded with a rejected key")
	}
	text, _ := json.Marshal(res)
	all := string(text) + everything(t, app, logs)
	if strings.Contains(all, key) {
		t.Errorf("the key leaked:\n%s", all)
	}
	if !slices.ContainsFunc(env.Artifact.Errors, func(e servertest.Error) bool { return strings.Contains(e.Message, "[REDACTED]") }) {
		t.Errorf("the errors do not show the redaction: %+v", env.Artifact.Errors)
	}
}
