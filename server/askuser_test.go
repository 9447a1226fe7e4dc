package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
)

// gateApp is an app with two counted tools, before (a step that runs
// ahead of the question) and destroy (the step the question gates), and
// a plan that asks the user between them.
type gateApp struct {
	app             *server.App
	before, destroy atomic.Int32
}

func newGateApp(t *testing.T) *gateApp {
	t.Helper()
	g := &gateApp{}
	count := func(name string, n *atomic.Int32) registry.Tool {
		return registry.Tool{Name: name, Description: "Counts its calls.", Source: "test",
			InputSchema: mustSchema(t, `{"type":"object"}`),
			Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) {
				return &registry.Result{Structured: map[string]any{"calls": float64(n.Add(1))}}, nil
			}}
	}
	g.app = newApp(t, config.Default(), count("before", &g.before), count("destroy", &g.destroy))
	return g
}

// gatePlan asks the user, between two steps, whether to destroy; extra
// goes into ask_user's arguments.
func gatePlan(extra map[string]any) map[string]any {
	ask := map[string]any{"message": "Destroy ${bindings.what}?", "schema": map[string]any{"type": "object", "properties": map[string]any{"why": map[string]any{"type": "string"}}}}
	for k, v := range extra {
		ask[k] = v
	}
	return map[string]any{
		"plan": map[string]any{"steps": []any{
			map[string]any{"id": "before", "tool": "before", "arguments": map[string]any{}},
			map[string]any{"id": "ok", "tool": "ask_user", "arguments": ask},
			map[string]any{"id": "destroy", "tool": "destroy", "arguments": map[string]any{"why": "$ok.output.content.why"}},
		}},
		"bindings": map[string]any{"what": "the cluster"},
		"response": "full",
	}
}

// elicitingClient is a go-sdk client whose user answers every elicitation
// with action (and content why when accepting), recording the questions.
type elicitingClient struct {
	mu     sync.Mutex
	asked  []string
	action string
}

func (c *elicitingClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.asked = append(c.asked, req.Params.Message)
		if c.action != "accept" {
			return &mcp.ElicitResult{Action: c.action}, nil
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"why": "obsolete"}}, nil
	}}
}

// TestAskUserThroughInputRequests: on protocol 2026-07-28 a client that
// declared elicitation is asked ask_user's question through the
// protocol's input requests (a tool handler cannot send it a request
// there), and its user's answer decides: accepted, the gated step runs
// with the answer; declined, it does not and the question fails with
// declined. The step before the question runs once: the answer resumes the
// paused run, it does not run the plan again. In memory and over
// stateless HTTP, where no server-to-client request exists at all.
func TestAskUserThroughInputRequests(t *testing.T) {
	for _, transport := range []string{"in-memory", "stateless HTTP"} {
		for _, action := range []string{"accept", "decline"} {
			t.Run(transport+"/"+action, func(t *testing.T) {
				g := newGateApp(t)
				user := &elicitingClient{action: action}
				var cs *mcp.ClientSession
				if transport == "in-memory" {
					cs = connectWith(t, g.app.Server, v20260728, user.options())
				} else {
					srv := httptest.NewServer(g.app.HTTPHandler(server.HTTPOptions{Stateless: true}))
					t.Cleanup(srv.Close)
					var err error
					cs, err = mcp.NewClient(&mcp.Implementation{Name: "user", Version: "test"}, user.options()).Connect(t.Context(),
						&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: srv.Client()}, &mcp.ClientSessionOptions{ProtocolVersion: v20260728})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { cs.Close() })
				}
				checkVersion(t, cs, v20260728)
				res, env := servertest.Call(t, cs, gatePlan(nil), nil)
				if len(user.asked) != 1 || user.asked[0] != "Destroy the cluster?" {
					t.Fatalf("the user was asked %q; want the one question", user.asked)
				}
				if n := g.before.Load(); n != 1 {
					t.Errorf("the step before the question ran %d times, want once", n)
				}
				steps := map[string]*servertest.Step{}
				for _, s := range env.Artifact.Steps {
					steps[s.ID] = s
				}
				if action == "accept" {
					if env.Artifact.Status != orchestrate.StatusSuccess || g.destroy.Load() != 1 {
						t.Fatalf("accepted: status %s, destroy ran %d times: %s", env.Artifact.Status, g.destroy.Load(), servertest.Text(res))
					}
					if out, _ := steps["ok"].Output.(map[string]any); out["action"] != "accept" || out["content"].(map[string]any)["why"] != "obsolete" {
						t.Errorf("the answer is %v", steps["ok"].Output)
					}
					return
				}
				if g.destroy.Load() != 0 || steps["ok"].Error == nil || steps["ok"].Error.Code != orchestrate.CodeDeclined || steps["destroy"].Status != orchestrate.StatusSkipped {
					t.Errorf("declined: destroy ran %d times, ok %+v, destroy %s", g.destroy.Load(), steps["ok"].Error, steps["destroy"].Status)
				}
			})
		}
	}
}

// TestAskUserWithoutElicitation: a client that declared no elicitation has
// no user to ask, on any protocol: the question fails with
// user_unavailable, the gated step does not run, and the message says how
// a plan lets the calling model answer instead.
func TestAskUserWithoutElicitation(t *testing.T) {
	for _, version := range []string{v20251125, v20260728} {
		t.Run(version, func(t *testing.T) {
			g := newGateApp(t)
			cs := connectWith(t, g.app.Server, version, nil)
			_, env := servertest.Call(t, cs, gatePlan(nil), nil)
			ok := env.Artifact.Steps[1]
			if env.Artifact.Status != orchestrate.StatusFailed || ok.Error == nil || ok.Error.Code != orchestrate.CodeUserUnavailable || g.destroy.Load() != 0 {
				t.Fatalf("status %s, question %+v, destroy ran %d times", env.Artifact.Status, ok.Error, g.destroy.Load())
			}
			if !strings.Contains(ok.Error.Message, `"if_no_user": "pause"`) {
				t.Errorf("the message does not say how to let the model answer: %s", ok.Error.Message)
			}
		})
	}
}

// TestAskUserModelAnswersWhenAllowed: with "if_no_user": "pause" and no
// user to ask, the run pauses and the calling model's answer resumes it;
// a client with elicitation still asks its user, even so.
func TestAskUserModelAnswersWhenAllowed(t *testing.T) {
	g := newGateApp(t)
	cs := connectWith(t, g.app.Server, v20260728, nil)
	_, env := servertest.Call(t, cs, gatePlan(map[string]any{"if_no_user": "pause"}), nil)
	if env.Artifact.Status != orchestrate.StatusAwaitingClient || len(env.Artifact.Pending) != 1 || env.Artifact.Pending[0].Tool != orchestrate.AskUserTool {
		t.Fatalf("status %s, pending %+v", env.Artifact.Status, env.Artifact.Pending)
	}
	_, env = servertest.Call(t, cs, map[string]any{"resume": map[string]any{"exec_id": env.ArtifactID,
		"results": map[string]any{"ok": map[string]any{"action": "accept", "content": map[string]any{"why": "the model says so"}}}}}, nil)
	if env.Artifact.Status != orchestrate.StatusSuccess || g.destroy.Load() != 1 || g.before.Load() != 1 {
		t.Fatalf("resumed: status %s, before ran %d, destroy ran %d", env.Artifact.Status, g.before.Load(), g.destroy.Load())
	}

	user := &elicitingClient{action: "decline"}
	g = newGateApp(t)
	cs = connectWith(t, g.app.Server, v20260728, user.options())
	_, env = servertest.Call(t, cs, gatePlan(map[string]any{"if_no_user": "pause"}), nil)
	if len(user.asked) != 1 || g.destroy.Load() != 0 || env.Artifact.Status != orchestrate.StatusFailed {
		t.Errorf("with elicitation the user decides: asked %d times, destroy ran %d, status %s", len(user.asked), g.destroy.Load(), env.Artifact.Status)
	}
}
