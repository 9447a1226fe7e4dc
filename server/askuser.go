package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/llm"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// Asking the user on protocol 2026-07-28. A tool handler cannot send the
// client a request there (req.Session.Elicit fails): it answers with input
// requests instead, and the client calls the tool again with the answers.
// When the client declared elicitation, ask_user pauses the run
// (orchestrate.RunOptions.AskOnPause); the paused run's ask_user calls
// become elicitation input requests, and the run is kept like any paused
// run (in the execution store, claimed once). The request state the
// client echoes names the run and which input request answers which step,
// signed with the server's state key: the run's outputs never travel
// through the client, and its finished steps are not run again. The call
// that brings the answers is the resume it stands for:
// {"resume": {"exec_id", "results": {step: {"action", "content"}}}}.

// askStateKind marks a request state as ask_user's, apart from the states
// of multi round-trip sampling signed with the same key.
const askStateKind = "ask_user"

// askState is what the request state of ask_user's input requests carries.
type askState struct {
	Kind   string `json:"kind"`
	ExecID string `json:"exec_id"`
	// Steps maps each input request's id to the step it asks for.
	Steps map[string]string `json:"steps"`
}

// asksOnPause reports whether ask_user reaches the user of req's client
// through the protocol's input requests: the client speaks 2026-07-28 or
// later and declared elicitation.
func asksOnPause(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil || req.ProtocolVersion() < "2026-07-28" {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil
}

// resultFor returns the tool's result for env: a paused run whose pending
// calls include ask_user questions, for a client asked on a pause, asks
// them as elicitation input requests; anything else is
// orchestrate.ResultFor's.
func (a *App) resultFor(req *mcp.CallToolRequest, env *orchestrate.Envelope) *mcp.CallToolResult {
	if res := a.askInput(req, env); res != nil {
		return res
	}
	return orchestrate.ResultFor(env, req.ProtocolVersion())
}

// askInput returns the input requests that ask the user the ask_user
// questions a paused run waits for, or nil.
func (a *App) askInput(req *mcp.CallToolRequest, env *orchestrate.Envelope) *mcp.CallToolResult {
	art := env.Artifact
	if art == nil || art.Status != orchestrate.StatusAwaitingClient || art.Resume == nil || !asksOnPause(req) {
		return nil
	}
	st := askState{Kind: askStateKind, ExecID: art.Resume.ExecID, Steps: map[string]string{}}
	asks := mcp.InputRequestMap{}
	for _, p := range art.Pending {
		if p.Tool != orchestrate.AskUserTool {
			continue // the client's own tools: the envelope lists them once these are answered
		}
		msg, _ := p.Arguments["message"].(string)
		schema, _ := p.Arguments["schema"].(map[string]any)
		if schema == nil {
			schema = map[string]any{"type": "object", "properties": map[string]any{}}
		}
		asks[p.CallID] = &mcp.ElicitParams{Message: msg, RequestedSchema: schema}
		st.Steps[p.CallID] = p.Step
	}
	if len(asks) == 0 {
		return nil
	}
	data, err := json.Marshal(st)
	if err != nil {
		a.log.Error("encoding the state of ask_user's input requests", "exec_id", st.ExecID, "err", err)
		return nil
	}
	return &mcp.CallToolResult{InputRequests: asks, RequestState: llm.SignState(a.planner.key, data)}
}

// errNotAskState reports a request state that is not ask_user's (it may be
// multi round-trip sampling's).
var errNotAskState = errors.New("not the state of ask_user's input requests")

// askAnswers turns a call that brings the answers to ask_user's input
// requests into the resume it stands for: its arguments become
// {"resume": ..., "response": ...}. It returns errNotAskState when the
// call's request state is not ask_user's, and an error the caller can act
// on when the state was not issued by this server.
func (a *App) askAnswers(req *mcp.CallToolRequest) (*mcp.CallToolRequest, error) {
	p := req.Params
	if p == nil || p.RequestState == "" {
		return nil, errNotAskState
	}
	raw, err := llm.VerifyState(a.planner.key, p.RequestState)
	if err != nil {
		return nil, fmt.Errorf("the request state was not issued by this server (or the server's state key changed: set server.state_key_env alike on every replica): %w", err)
	}
	var st askState
	if json.Unmarshal(raw, &st) != nil || st.Kind != askStateKind {
		return nil, errNotAskState
	}
	results := map[string]any{}
	for id, step := range st.Steps {
		answer, ok := p.InputResponses[id].(*mcp.ElicitResult)
		if !ok {
			continue // unanswered: the run asks again
		}
		content := answer.Content
		if content == nil {
			content = map[string]any{}
		}
		results[step] = map[string]any{"action": answer.Action, "content": content}
	}
	args := map[string]any{"resume": map[string]any{"exec_id": st.ExecID, "results": results}}
	var orig struct {
		Response string `json:"response"`
	}
	if json.Unmarshal(p.Arguments, &orig) == nil && orig.Response != "" {
		args["response"] = orig.Response
	}
	data, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encoding the resume of run %s: %w", st.ExecID, err)
	}
	params := *p
	params.Arguments, params.InputResponses, params.RequestState = data, nil, ""
	next := *req
	next.Params = &params
	return &next, nil
}

// refuseAskState answers a call whose request state is not this server's.
func (a *App) refuseAskState(ctx context.Context, e *orchestrate.Engine, req *mcp.CallToolRequest, err error) *mcp.CallToolResult {
	return orchestrate.ResultFor(e.Reject(ctx, []*orchestrate.Issue{{Path: "requestState", Code: orchestrate.CodeInvalidRequest, Message: err.Error() + "; call the tool again without it"}}), req.ProtocolVersion())
}
