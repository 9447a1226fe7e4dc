package server_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/agents"
	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/testutil/fakeopenai"
	"github.com/orchestra-mcp/orchestra/testutil/servertest"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// namedTokensConfig is a configuration with the named tokens alice and bob,
// and a planner on the fake model at url.
func namedTokensConfig(t *testing.T, url string) *config.Config {
	t.Setenv("ALICE_TOKEN", "alice-secret-token")
	t.Setenv("BOB_TOKEN", "bob-secret-token")
	cfg := config.Default()
	cfg.Server.Auth = config.Auth{Tokens: []config.NamedToken{{Name: "alice", TokenEnv: "ALICE_TOKEN"}, {Name: "bob", TokenEnv: "BOB_TOKEN"}}}
	cfg.Planner = &config.Planner{Config: llm.Config{Provider: llm.ProviderOpenAI, Model: "fake", BaseURL: url, MaxRetries: -1}}
	return cfg
}

// planningRequests keeps the planning requests a fake model received and
// answers each with a direct response naming its goal.
type planningRequests struct {
	mu   sync.Mutex
	user []string
}

func (p *planningRequests) answer(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = append(p.user, r.User())
	return fakeopenai.Call("__planning__", `{"type": "direct_response", "content": "answer number `+string(rune('0'+len(p.user)))+`"}`)
}

func (p *planningRequests) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.user[len(p.user)-1]
}

// TestConversationOfItsCaller: over HTTP, alice's second prompt with a
// context id gets her first turn (goal and answer) in its planning
// request; bob's prompt with the same id is another conversation and gets
// none; a prompt without a context id gets none either. The conversation
// is alice's alone in orchestra://conversations/{id}.
func TestConversationOfItsCaller(t *testing.T) {
	model := &planningRequests{}
	fake := fakeopenai.New(t, model.answer)
	app := newApp(t, namedTokensConfig(t, fake.URL()))
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice, bob := connectAs(t, srv, "alice-secret-token"), connectAs(t, srv, "bob-secret-token")

	ask := func(cs *mcp.ClientSession, args map[string]any, meta mcp.Meta) string {
		t.Helper()
		_, env := servertest.Call(t, cs, args, meta)
		if !env.Artifact.Success {
			t.Fatalf("the prompt failed: %+v", env.Artifact.Errors)
		}
		return model.last()
	}
	const history = "The conversation so far"
	first := ask(alice, map[string]any{"prompt": "name the first planet", "context_id": "trip-1"}, nil)
	if strings.Contains(first, history) {
		t.Errorf("the first turn of a conversation has history:\n%s", first)
	}
	second := ask(alice, map[string]any{"prompt": "and the second?"}, mcp.Meta{toolcontext.MetaContextID: "trip-1"})
	if !strings.Contains(second, history) || !strings.Contains(second, "user: name the first planet") || !strings.Contains(second, "assistant: answer number 1") {
		t.Errorf("alice's second turn lacks her first in its planning request:\n%s", second)
	}
	if got := ask(bob, map[string]any{"prompt": "what did alice ask?", "context_id": "trip-1"}, nil); strings.Contains(got, "first planet") || strings.Contains(got, history) {
		t.Errorf("bob's call with alice's context id got her conversation:\n%s", got)
	}
	if got := ask(alice, map[string]any{"prompt": "no conversation"}, nil); strings.Contains(got, history) {
		t.Errorf("a call without a context id got a conversation:\n%s", got)
	}
	read := func(cs *mcp.ClientSession) (string, error) {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.ConversationURI("trip-1")})
		if err != nil {
			return "", err
		}
		return res.Contents[0].Text, nil
	}
	if text, err := read(alice); err != nil || !strings.Contains(text, "name the first planet") || !strings.Contains(text, "and the second?") || strings.Contains(text, "what did alice ask") {
		t.Errorf("alice's conversation resource (%v):\n%s", err, text)
	}
	if text, err := read(bob); err != nil || strings.Contains(text, "first planet") || !strings.Contains(text, "what did alice ask") {
		t.Errorf("bob's conversation resource (%v):\n%s", err, text)
	}
}

// TestAgentsGetTheConversation: the agent step of a prompt-path run whose
// caller named a conversation gets its earlier turns, as the planning
// request does; the agent of a run that named none gets none.
func TestAgentsGetTheConversation(t *testing.T) {
	var mu sync.Mutex
	var agentUser []string
	fake := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
		if !isPlanning(r) {
			mu.Lock()
			agentUser = append(agentUser, r.User())
			mu.Unlock()
			return fakeopenai.Text("packed")
		}
		if strings.Contains(r.User(), "delegate") {
			return fakeopenai.Call("__planning__", planAgentStep)
		}
		return fakeopenai.Call("__planning__", `{"type": "direct_response", "content": "Mars is the fourth planet"}`)
	})
	cfg := namedTokensConfig(t, fake.URL())
	cfg.Agents = map[string]agents.Config{"helper": {Description: "Helps.", Instructions: "You are helper."}}
	app := newApp(t, cfg)
	srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{}))
	t.Cleanup(srv.Close)
	alice := connectAs(t, srv, "alice-secret-token")

	for _, args := range []map[string]any{
		{"prompt": "which planet is fourth?", "context_id": "trip-2"},
		{"prompt": "delegate the packing list", "context_id": "trip-2"},
		{"prompt": "delegate it once more"},
	} {
		if _, env := servertest.Call(t, alice, args, nil); !env.Artifact.Success {
			t.Fatalf("%v: %+v", args["prompt"], env.Artifact.Errors)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agentUser) != 2 {
		t.Fatalf("the agent was asked %d times, want 2", len(agentUser))
	}
	if got := agentUser[0]; !strings.Contains(got, "user: which planet is fourth?") || !strings.Contains(got, "assistant: Mars is the fourth planet") {
		t.Errorf("the agent of the conversation's second turn lacks its first:\n%s", got)
	}
	if got := agentUser[1]; strings.Contains(got, "which planet") || strings.Contains(got, "Mars") {
		t.Errorf("the agent of a run without a context id got a conversation:\n%s", got)
	}
}
