package server_test

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/server"
)

// bgLimitConfig has four callers: alice and carol in tenant team, which
// may hold 3 background runs together; dave and erin in no tenant. Each
// caller may hold 2, the server 4.
func bgLimitConfig(t *testing.T) *config.Config {
	cfg := config.Default()
	var tokens []config.NamedToken
	for _, name := range []string{"alice", "carol", "dave", "erin"} {
		env := strings.ToUpper(name) + "_BG_TOKEN"
		t.Setenv(env, name+"-secret-token")
		tokens = append(tokens, config.NamedToken{Name: name, TokenEnv: env})
	}
	cfg.Server.Auth = config.Auth{Tokens: tokens}
	cfg.Tenants = map[string]config.Tenant{
		"team": {Match: config.TenantMatch{Tokens: []string{"alice", "carol"}}, Limits: config.TenantLimits{MaxBackground: 3}},
	}
	cfg.Limits.MaxBackground = 2
	cfg.Limits.BackgroundQueueDepth = 4
	cfg.Limits.QueueTimeout = 7 * time.Second
	return cfg
}

// queueFull checks that env is a queue_full refusal naming limit, with
// the retry hint.
func queueFull(t *testing.T, who string, env *bgEnvelope, isError bool, limit string) {
	t.Helper()
	if !isError || env.Artifact.Background != nil || len(env.Artifact.ValidationErrors) != 1 {
		t.Fatalf("%s: want a queue_full refusal, got error %v, %+v", who, isError, env.Artifact)
	}
	is := env.Artifact.ValidationErrors[0]
	if is.Code != orchestrate.CodeQueueFull || is.RetryAfterMS != 7000 || !strings.Contains(is.Message, limit) || !strings.Contains(is.Message, "retry") {
		t.Fatalf("%s: want queue_full naming %s with retry_after_ms 7000, got %+v", who, limit, is)
	}
}

// TestBackgroundLimits: over HTTP with tokens, a caller's background runs
// stop at limits.max_background, a tenant's callers' at the tenant's
// max_background, the server's at limits.background_queue_depth; past
// each the call is refused with queue_full, a message naming the limit
// and retry_after_ms, and nothing runs. A run that ends gives its place
// back: its owner may start another.
func TestBackgroundLimits(t *testing.T) {
	g := newGate()
	app := newApp(t, bgLimitConfig(t), g.tool(t, "gate"))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, "alice-secret-token")
	carol := connectAs(t, srv, "carol-secret-token")
	dave := connectAs(t, srv, "dave-secret-token")
	erin := connectAs(t, srv, "erin-secret-token")

	type held struct {
		cs *mcp.ClientSession
		id string
	}
	var runs []held
	accept := func(name string, cs *mcp.ClientSession, res bool, env *bgEnvelope) {
		t.Helper()
		if res || env.Artifact.Status != orchestrate.StatusRunning || env.Artifact.Background == nil {
			t.Fatalf("%s's background run was not accepted: %+v", name, env.Artifact)
		}
		receive(t, g.started, name+"'s step")
		runs = append(runs, held{cs, env.Artifact.Background.ExecID})
	}

	res, env := callBG(t, alice, gatedSteps("gate", 1))
	accept("alice", alice, res.IsError, env)
	res, env = callBG(t, alice, gatedSteps("gate", 1))
	accept("alice", alice, res.IsError, env)
	res, env = callBG(t, alice, gatedSteps("gate", 1))
	queueFull(t, "alice's third", env, res.IsError, "limits.max_background")

	res, env = callBG(t, carol, gatedSteps("gate", 1))
	accept("carol", carol, res.IsError, env)
	res, env = callBG(t, carol, gatedSteps("gate", 1)) // carol holds 1 of 2, but team holds 3 of 3
	queueFull(t, "carol's second", env, res.IsError, "tenant")

	res, env = callBG(t, dave, gatedSteps("gate", 1))
	accept("dave", dave, res.IsError, env)
	res, env = callBG(t, erin, gatedSteps("gate", 1)) // erin holds none, the server 4 of 4
	queueFull(t, "erin's first", env, res.IsError, "limits.background_queue_depth")
	select {
	case <-g.started:
		t.Fatal("a refused background run started a step")
	default:
	}

	// Alice's first run ends (cancelled): she, her tenant and the server
	// have a place again.
	_, env = callBG(t, alice, map[string]any{"cancel": map[string]any{"exec_id": runs[0].id}})
	receive(t, g.stopped, "the cancelled step")
	if env.Artifact.Status != orchestrate.StatusCancelled {
		t.Fatalf("the cancel's answer: %+v", env.Artifact)
	}
	res, env = callBG(t, alice, gatedSteps("gate", 1))
	accept("alice, after one of hers ended,", alice, res.IsError, env)

	for _, r := range runs[1:] {
		callBG(t, r.cs, map[string]any{"cancel": map[string]any{"exec_id": r.id}})
		receive(t, g.stopped, "a cancelled step")
	}
}

// TestBackgroundLimitUnderRace: calls made at once by one caller take
// exactly limits.max_background places; the rest are queue_full.
func TestBackgroundLimitUnderRace(t *testing.T) {
	g := newGate()
	cfg := config.Default()
	cfg.Limits.MaxBackground = 3
	app := newApp(t, cfg, g.tool(t, "gate"))
	cs := connectInMemory(t, app, v20251125)

	const calls = 10
	var wg sync.WaitGroup
	codes := make(chan string, calls)
	for range calls {
		wg.Go(func() {
			res, env := callBG(t, cs, gatedSteps("gate", 1))
			switch {
			case !res.IsError && env.Artifact.Status == orchestrate.StatusRunning:
				codes <- "running"
			case len(env.Artifact.ValidationErrors) == 1:
				codes <- string(env.Artifact.ValidationErrors[0].Code)
			default:
				codes <- "unexpected: " + env.Artifact.Status
			}
		})
	}
	wg.Wait()
	close(codes)
	got := map[string]int{}
	for c := range codes {
		got[c]++
	}
	if got["running"] != 3 || got[string(orchestrate.CodeQueueFull)] != calls-3 || len(got) != 2 {
		t.Fatalf("%d calls at once with max_background 3: %v", calls, got)
	}
	for range 3 {
		receive(t, g.started, "an accepted run's step")
	}
	for range 3 {
		g.release <- struct{}{}
	}
}
