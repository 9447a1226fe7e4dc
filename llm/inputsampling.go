package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InputSampling is a [Model] for sampling inside a tool handler on protocol
// 2026-07-28 and later, where the server cannot send sampling/createMessage
// itself: the handler returns the sampling request to the client as an input
// request and is called again with the answer (multi round-trip requests).
//
// A handler builds an InputSampling from each invocation's request and runs
// its work from the start. Calls the client has already answered are replayed
// from the request state, so the work reaches the same point again; the first
// unanswered call fails with [ErrInputRequired], and the handler returns
// [InputSampling.InputResult]:
//
//	m, err := llm.NewInputSampling(key, req, llm.SamplingOptions{})
//	if err != nil {
//		return nil, err
//	}
//	out, err := plan(ctx, m) // calls m.Generate any number of times
//	if errors.Is(err, llm.ErrInputRequired) {
//		return m.InputResult()
//	}
//
// The work must be deterministic given the model's answers: each replayed
// call must ask exactly what was asked before, or Generate fails. The state
// carries every answer so far, signed with key ([SignState]) and bound to
// the tool call's arguments, so a client can neither forge answers nor move
// them to another call.
type InputSampling struct {
	key      []byte
	opts     SamplingOptions
	tools    bool
	argsHash string

	mu      sync.Mutex
	rounds  []inputRound
	calls   int
	pending *inputPending
}

// inputRound is one answered sampling call: the hash of what was asked and
// the client's answer.
type inputRound struct {
	Req string          `json:"req"`
	Res json.RawMessage `json:"res"`
}

type inputPending struct {
	ID     string           `json:"id"`
	Req    string           `json:"req"`
	params mcp.InputRequest `json:"-"`
}

// inputState is what RequestState carries between rounds.
type inputState struct {
	Args    string        `json:"args"`
	Rounds  []inputRound  `json:"rounds,omitempty"`
	Pending *inputPending `json:"pending,omitempty"`
}

// NewInputSampling returns the model for one invocation of a tool handler.
// key signs the request state; it must be a secret of the server, at least
// 16 bytes long, and the same across the instances serving the same clients.
// It fails when the client offers no sampling, or when the request state was
// not issued by this server for these arguments ([ErrInvalidState]).
func NewInputSampling(key []byte, req *mcp.CallToolRequest, opts SamplingOptions) (*InputSampling, error) {
	const op = "resuming sampling"
	if len(key) < 16 {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest, Err: errors.New("the state key must be at least 16 bytes")}
	}
	if req == nil || req.Params == nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest, Err: errors.New("no tool call")}
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Sampling == nil {
		return nil, errNoSampling()
	}
	args, err := canonicalHash(req.Params.Arguments)
	if err != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest, Err: fmt.Errorf("reading the tool arguments: %w", err)}
	}
	m := &InputSampling{key: key, opts: opts, tools: caps.Sampling.Tools != nil && !opts.TextTools, argsHash: args}
	if req.Params.RequestState == "" {
		return m, nil
	}
	raw, err := VerifyState(key, req.Params.RequestState)
	if err != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Err: err}
	}
	var st inputState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Err: fmt.Errorf("%w: %v", ErrInvalidState, err)}
	}
	if st.Args != args {
		return nil, &Error{Provider: ProviderSampling, Op: op, Err: fmt.Errorf("%w: it was issued for other arguments", ErrInvalidState)}
	}
	m.rounds = st.Rounds
	if st.Pending != nil {
		res, ok := req.Params.InputResponses[st.Pending.ID]
		if !ok || res == nil {
			return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadResponse,
				Err: fmt.Errorf("the client sent no answer to input request %q", st.Pending.ID)}
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadResponse, Err: err}
		}
		m.rounds = append(m.rounds, inputRound{Req: st.Pending.Req, Res: b})
	}
	return m, nil
}

// Name implements [Model].
func (m *InputSampling) Name() string { return ProviderSampling }

// Generate implements [Model]. It returns the client's answer when the call
// was answered in an earlier round, and otherwise records the call and fails
// with [ErrInputRequired]. Only one call can wait for the client at a time.
func (m *InputSampling) Generate(ctx context.Context, req *Request) (*Response, error) {
	const op = "sampling through an input request"
	if err := req.validate(); err != nil {
		return nil, withOp(err, ProviderSampling, op)
	}
	if err := ctx.Err(); err != nil {
		e := &Error{Provider: ProviderSampling, Op: op, Err: err}
		classifyTransport(e, ctx)
		return nil, e
	}
	r := samplingDefaults(req, m.opts)
	var (
		params mcp.InputRequest
		err    error
	)
	if m.tools && len(r.Tools) > 0 && r.ToolChoice != ToolChoiceNone {
		params, err = CreateMessageWithToolsParams(r)
	} else {
		params, err = CreateMessageParams(r)
	}
	if err != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest, Err: err}
	}
	hash, err := canonicalHash(params)
	if err != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest, Err: err}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.calls
	m.calls++
	if i < len(m.rounds) {
		if m.rounds[i].Req != hash {
			return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest,
				Err: fmt.Errorf("sampling call %d differs from the one the client answered: the handler must repeat its calls in the same order", i+1)}
		}
		var res mcp.CreateMessageWithToolsResult
		if err := json.Unmarshal(m.rounds[i].Res, &res); err != nil {
			return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadResponse, Err: err}
		}
		resp, err := ResponseFromSampling(r, &res)
		if err != nil {
			return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadResponse, Err: err}
		}
		return resp, nil
	}
	if m.pending != nil {
		return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrBadRequest,
			Err: errors.New("another sampling call is already waiting for the client")}
	}
	m.pending = &inputPending{ID: fmt.Sprintf("sampling-%d", i+1), Req: hash, params: params}
	return nil, &Error{Provider: ProviderSampling, Op: op, Kind: ErrInputRequired,
		Err: fmt.Errorf("sampling call %d is sent to the client as input request %q", i+1, m.pending.ID)}
}

// Pending reports whether a call is waiting for the client.
func (m *InputSampling) Pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending != nil
}

// InputResult returns the tool result that sends the waiting call to the
// client: its input request and the signed state for the next round.
// It is an error when no call is waiting.
func (m *InputSampling) InputResult() (*mcp.CallToolResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending == nil {
		return nil, errors.New("llm: no sampling call is waiting for the client")
	}
	st, err := json.Marshal(inputState{Args: m.argsHash, Rounds: m.rounds, Pending: m.pending})
	if err != nil {
		return nil, fmt.Errorf("llm: encoding the request state: %w", err)
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{m.pending.ID: m.pending.params},
		RequestState:  SignState(m.key, st),
	}, nil
}

// canonicalHash hashes v's JSON with object keys sorted, so that equal
// values hash alike however they were spelled.
func canonicalHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var x any
	if len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &x); err != nil {
			return "", err
		}
	}
	if b, err = json.Marshal(x); err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
