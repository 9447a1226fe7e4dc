package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/budget"
	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/planner"
	"github.com/orchestra-mcp/orchestra/store"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// conversationTimeout bounds the store's reads and writes of a turn.
const conversationTimeout = 10 * time.Second

// conversationOf returns the conversation a prompt-path call names: the
// input's context_id, else its _meta's (toolcontext.MetaContextID), of
// its caller (owner and tenant). A call that names none has none: the id
// of its session is not a conversation.
func conversationOf(ctx context.Context, req *mcp.CallToolRequest, r *orchestrate.Request) (store.ConversationKey, bool) {
	id := r.ContextID
	if id == "" && req != nil && req.Params != nil {
		if v, ok := req.Params.GetMeta()[toolcontext.MetaContextID].(string); ok && validCallerID(v) {
			id = v
		}
	}
	if id == "" {
		return store.ConversationKey{}, false
	}
	ids, _ := toolcontext.IDsFrom(ctx)
	return store.ConversationKey{Owner: ids.Owner, Tenant: ids.Tenant, ContextID: id}, true
}

// contextTokens is the budget of the caller's context in planning,
// RESPOND and agents' requests (planner.context_tokens).
func (a *App) contextTokens() int {
	if n := a.planner.options.ContextTokens; n > 0 {
		return n
	}
	return planner.DefaultContextTokens
}

// withConversation gives r, when it brings no history of its own, the
// earlier turns of conversation k, newest first within the context budget,
// and returns ctx carrying them for the agents of its run. Their bytes
// count against the request's budget; a turn that cannot be read leaves
// the call without history (and logged), never without its run.
func (a *App) withConversation(ctx context.Context, k store.ConversationKey, r *orchestrate.Request) context.Context {
	if r.Context != nil && len(r.Context.History) > 0 {
		return ctx // the caller's own history is the conversation
	}
	tokens := a.contextTokens()
	rctx, cancel := context.WithTimeout(ctx, conversationTimeout)
	defer cancel()
	turns, err := a.store.RecentTurns(rctx, k, tokens*4)
	if err != nil {
		a.log.WarnContext(ctx, "reading a conversation", "context_id", k.ContextID, "err", err)
		return ctx
	}
	if len(turns) == 0 {
		return ctx
	}
	history := make([]orchestrate.Turn, 0, 2*len(turns))
	size := 0
	for _, t := range turns {
		history = append(history, orchestrate.Turn{Role: "user", Content: t.Goal}, orchestrate.Turn{Role: "assistant", Content: t.Answer})
		size += len(t.Goal) + len(t.Answer)
	}
	if b, ok := toolcontext.BudgetFrom(ctx); ok {
		if err := b.Spend(budget.Bytes, int64(size)); err != nil {
			a.log.WarnContext(ctx, "a conversation's turns do not fit the request's budget", "context_id", k.ContextID, "err", err)
			return ctx
		}
	}
	c := orchestrate.CallerContext{}
	if r.Context != nil {
		c = *r.Context
	}
	c.History = history
	r.Context = &c
	return orchestrate.WithConversation(ctx, history, tokens)
}

// appendTurn adds the call's goal and its run's answer to conversation k.
// It is written even when the call was cancelled: the run happened.
func (a *App) appendTurn(ctx context.Context, k store.ConversationKey, goal string, env *orchestrate.Envelope) {
	if env == nil || env.Artifact == nil {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), conversationTimeout)
	defer cancel()
	t := store.Turn{Goal: goal, Answer: answerOf(env), ExecID: env.Metadata.ExecID}
	if err := a.store.AppendTurn(wctx, k, t); err != nil {
		a.log.WarnContext(ctx, "adding a conversation turn", "context_id", k.ContextID, "err", err)
	}
}

// answerOf is what a run answered its goal with: the written answer, the
// plan's answer or its result, or, without any, what became of the run.
func answerOf(env *orchestrate.Envelope) string {
	a := env.Artifact
	switch {
	case a.Response != "":
		return a.Response
	case a.Answer != "":
		return a.Answer
	case a.Result != nil:
		data, err := json.Marshal(a.Result)
		if err == nil {
			return textcut.Truncate(string(data), store.MaxTurnBytes/2)
		}
	}
	if len(a.Errors) > 0 {
		return "(no answer: the run ended " + a.Status + ": " + a.Errors[0].Message + ")"
	}
	return "(no answer: the run ended " + a.Status + ")"
}

// ConversationsURI is the MCP resource that lists the caller's
// conversations; ConversationURI names one.
const ConversationsURI = "orchestra://conversations"

// ConversationURI is the MCP resource of the caller's conversation id.
func ConversationURI(id string) string { return ConversationsURI + "/" + url.PathEscape(id) }

// ConversationPage is the content of orchestra://conversations/{id}.
type ConversationPage struct {
	ContextID string       `json:"context_id"`
	Turns     []store.Turn `json:"turns"`
}

// callerConversations is the scope of the conversations of extra's caller:
// its own (owner and tenant), the machine's own callers' being those of
// the owner "". Unlike records, whose machine's own reader sees all, a
// conversation id means one caller's conversation.
func callerConversations(extra *mcp.RequestExtra) store.Scope {
	user, tenant := callerIdentity(extra)
	return store.OwnerScope(user).InTenant(tenant)
}

// addConversationResources serves orchestra://conversations (the caller's
// conversations, the most recent first) and orchestra://conversations/{id}
// (one of them, its turns oldest first).
func (a *App) addConversationResources() {
	a.Server.AddResource(&mcp.Resource{
		URI:         ConversationsURI,
		Name:        "conversations",
		Title:       "Your conversations",
		Description: "The conversations your prompts named with a context_id, the most recent first (at most " + strconv.Itoa(maxConversationsListed) + "). Read orchestra://conversations/{context_id} for one conversation's turns.",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		list, err := a.store.Conversations(ctx, callerConversations(req.Extra), maxConversationsListed)
		if err != nil {
			return nil, err
		}
		for i := range list {
			list[i].Owner, list[i].Tenant = "", "" // the caller's own
		}
		return jsonResource(req.Params.URI, map[string]any{"conversations": list})
	})
	a.Server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: ConversationsURI + "/{context_id}",
		Name:        "conversation",
		Title:       "One conversation",
		Description: "The turns (goal and answer, oldest first) of your conversation context_id: what the planner is given of it when a prompt names it.",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		id, err := url.PathUnescape(strings.TrimPrefix(uri, ConversationsURI+"/"))
		if err != nil || !validCallerID(id) {
			return nil, mcp.ResourceNotFoundError(quotedURI(uri))
		}
		turns, err := a.store.TurnsIn(ctx, callerConversations(req.Extra), id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, mcp.ResourceNotFoundError(quotedURI(uri))
		}
		if err != nil {
			return nil, err
		}
		return jsonResource(uri, ConversationPage{ContextID: id, Turns: turns})
	})
}

// maxConversationsListed caps the conversations orchestra://conversations lists.
const maxConversationsListed = 1000
