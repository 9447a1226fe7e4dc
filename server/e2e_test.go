package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// The protocol versions the SDK speaks.
const (
	v20260728 = "2026-07-28"
	v20251125 = "2025-11-25"
)

// probe is a fake tool that counts its calls and echoes its label.
type probe struct {
	calls atomic.Int64
	// block, when not nil, is received from before the probe answers.
	block chan struct{}
	// started, when not nil, gets a value when a call starts.
	started chan struct{}
}

func (p *probe) tool(t testing.TB, name string) registry.Tool {
	return registry.Tool{
		Name:         name,
		Description:  "Echoes its label. A test tool that counts its calls.",
		Source:       "test",
		InputSchema:  mustSchema(t, `{"type":"object","properties":{"label":{"type":"string"}},"required":["label"],"additionalProperties":false}`),
		OutputSchema: mustSchema(t, `{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true},
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			p.calls.Add(1)
			if p.started != nil {
				p.started <- struct{}{}
			}
			if p.block != nil {
				select {
				case <-p.block:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &registry.Result{Structured: map[string]any{"label": req.Arguments["label"]}}, nil
		},
	}
}

func (p *probe) spec(name string) servertest.Probe {
	return servertest.Probe{
		Tool:      name,
		Args:      func(label string) map[string]any { return map[string]any{"label": label} },
		LabelPath: ".label",
		Calls:     func() int { return int(p.calls.Load()) },
	}
}

func mustSchema(t testing.TB, s string) *jsonschema.Schema {
	t.Helper()
	var sc jsonschema.Schema
	if err := json.Unmarshal([]byte(s), &sc); err != nil {
		t.Fatalf("schema %s: %v", s, err)
	}
	return &sc
}

// newApp builds an app with the probe in its catalog.
func newApp(t testing.TB, cfg *config.Config, tools ...registry.Tool) *server.App {
	t.Helper()
	app, err := server.New(t.Context(), cfg, server.Options{Tools: tools, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close() })
	return app
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "test"}, nil)
}

// connectInMemory connects a client to app over in-memory transports,
// asking for protocol version.
func connectInMemory(t *testing.T, app *server.App, version string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := newClient().Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// connectHTTP serves app over Streamable HTTP and connects a client.
func connectHTTP(t *testing.T, app *server.App, opts server.HTTPOptions, version string) (*mcp.ClientSession, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(app.HTTPHandler(opts))
	t.Cleanup(srv.Close)
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: srv.Client()}
	cs, err := newClient().Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, srv
}

func checkVersion(t *testing.T, cs *mcp.ClientSession, want string) {
	t.Helper()
	if got := cs.InitializeResult().ProtocolVersion; got != want {
		t.Fatalf("negotiated protocol version %s, want %s", got, want)
	}
}

func TestE2EInMemory(t *testing.T) {
	for _, version := range []string{v20260728, v20251125} {
		t.Run(version, func(t *testing.T) {
			p := &probe{}
			app := newApp(t, nil, p.tool(t, "probe"))
			cs := connectInMemory(t, app, version)
			checkVersion(t, cs, version)
			servertest.Run(t, cs, p.spec("probe"))
		})
	}
}

func TestE2EInMemoryDefaultVersion(t *testing.T) {
	p := &probe{}
	app := newApp(t, nil, p.tool(t, "probe"))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := app.Server.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := newClient().Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	checkVersion(t, cs, v20260728)
}

func TestE2EHTTP(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		ask, want string
	}{
		// Stateful Streamable HTTP serves sessions to older clients and
		// 2026-07-28, which has none, without one.
		{"stateful/" + v20260728, false, v20260728, v20260728},
		{"stateful/" + v20251125, false, v20251125, v20251125},
		{"stateless/" + v20260728, true, v20260728, v20260728},
		{"stateless/" + v20251125, true, v20251125, v20251125},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &probe{}
			app := newApp(t, nil, p.tool(t, "probe"))
			cs, _ := connectHTTP(t, app, server.HTTPOptions{Stateless: tc.stateless}, tc.ask)
			checkVersion(t, cs, tc.want)
			servertest.Run(t, cs, p.spec("probe"))
		})
	}
}
