package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Scripted is a [Model] that returns prepared responses in order, for tests
// and demos. It records every request it is given.
//
// It is safe for concurrent use; concurrent calls take the next responses in
// the order they arrive.
type Scripted struct {
	name string

	mu       sync.Mutex
	entries  []scriptEntry
	next     int
	requests []Request
}

// scriptEntry is one line of a script: a response, or an error to return.
type scriptEntry struct {
	Response
	Error *scriptError `json:"error,omitempty"`
	// After, when set, is the id of a tool call: the entry answers the
	// request whose conversation ends with that call's result, out of
	// order, and is never taken in order. A run resumed in another
	// process (after its client ran the call) thus gets the right turn.
	After string `json:"after,omitempty"`
	used  bool
}

// scriptError is an error a script asks for, e.g. {"kind": "rate_limited"}.
type scriptError struct {
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
}

var scriptErrorKinds = map[string]error{
	"rate_limited": ErrRateLimited,
	"timeout":      ErrTimeout,
	"auth":         ErrAuth,
	"bad_request":  ErrBadRequest,
	"unavailable":  ErrUnavailable,
	"bad_response": ErrBadResponse,
}

// NewScripted returns a model that answers with responses, one per call.
func NewScripted(responses []Response) *Scripted {
	s := &Scripted{name: ProviderScripted}
	for _, r := range responses {
		s.entries = append(s.entries, scriptEntry{Response: r})
	}
	return s
}

// LoadScript reads a script: a JSON array of responses, or JSON Lines with
// one response per line. Each response has "text" and/or "tool_calls"
// ({"id", "name", "arguments"}), and optionally "usage", "model" and
// "stop_reason". An entry {"error": {"kind": "rate_limited", "message": "..."}}
// makes that call fail instead; the kinds are rate_limited, timeout, auth,
// bad_request, unavailable and bad_response. An entry with "after": "<tool
// call id>" answers only the request whose conversation ends with that
// call's result (a loop resumed after its client ran the call, perhaps in
// another process), whatever its place.
func LoadScript(path string) (*Scripted, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading planner script: %w", err)
	}
	entries, err := parseScript(data)
	if err != nil {
		return nil, fmt.Errorf("reading planner script %s: %w", path, err)
	}
	return &Scripted{name: ProviderScripted + ":" + filepath.Base(path), entries: entries}, nil
}

func parseScript(data []byte) ([]scriptEntry, error) {
	data = bytes.TrimSpace(data)
	var entries []scriptEntry
	if len(data) > 0 && data[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&entries); err != nil {
			return nil, err
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 16<<20)
		for line := 1; sc.Scan(); line++ {
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			var e scriptEntry
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&e); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			entries = append(entries, e)
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	for i, e := range entries {
		if e.Error != nil {
			if _, ok := scriptErrorKinds[e.Error.Kind]; !ok {
				return nil, fmt.Errorf("response %d: unknown error kind %q", i+1, e.Error.Kind)
			}
			continue
		}
		for j, tc := range e.ToolCalls {
			if tc.Name == "" {
				return nil, fmt.Errorf("response %d: tool call %d has no name", i+1, j+1)
			}
		}
	}
	return entries, nil
}

// Name implements [Model].
func (s *Scripted) Name() string { return s.name }

// Generate implements [Model]: it records req and returns the next response.
// Running out of responses is an error matching [ErrScriptExhausted].
func (s *Scripted) Generate(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		e := &Error{Provider: ProviderScripted, Op: "generating", Err: err}
		classifyTransport(e, ctx)
		return nil, e
	}
	if err := req.validate(); err != nil {
		return nil, withOp(err, ProviderScripted, "generating")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, cloneRequest(req))
	i := s.take(req)
	n := i + 1
	op := fmt.Sprintf("response %d", n)
	if i >= len(s.entries) {
		return nil, &Error{Provider: ProviderScripted, Op: op, Kind: ErrScriptExhausted,
			Err: fmt.Errorf("the script has %d responses and all were used", len(s.entries))}
	}
	e := s.entries[i]
	if e.Error != nil {
		msg := e.Error.Message
		if msg == "" {
			msg = "scripted failure"
		}
		return nil, &Error{Provider: ProviderScripted, Op: op, Kind: scriptErrorKinds[e.Error.Kind], Err: errors.New(msg)}
	}
	resp := e.Response
	resp.ToolCalls = slices.Clone(resp.ToolCalls)
	for i := range resp.ToolCalls {
		if resp.ToolCalls[i].ID == "" {
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", n, i+1)
		}
		resp.ToolCalls[i].Arguments = argsOrEmpty(slices.Clone(resp.ToolCalls[i].Arguments))
	}
	if resp.Model == "" {
		resp.Model = ProviderScripted
	}
	if resp.StopReason == "" {
		resp.StopReason = StopEndTurn
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = StopToolUse
		}
	}
	return &resp, nil
}

// take returns the index of the entry that answers req, and marks it
// used: the unused entry after the call whose result ends req's
// conversation, else the next in order; len(entries) when none is left.
func (s *Scripted) take(req *Request) int {
	if k := len(req.Messages); k > 0 && req.Messages[k-1].Role == RoleTool {
		id := req.Messages[k-1].ToolCallID
		for i := range s.entries {
			if e := &s.entries[i]; e.After != "" && e.After == id && !e.used {
				e.used = true
				return i
			}
		}
	}
	for s.next < len(s.entries) && (s.entries[s.next].After != "" || s.entries[s.next].used) {
		s.next++
	}
	i := s.next
	if i < len(s.entries) {
		s.entries[i].used = true
		s.next++
	}
	return i
}

// Requests returns copies of the requests Generate was given, in order.
func (s *Scripted) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i := range s.requests {
		out[i] = cloneRequest(&s.requests[i])
	}
	return out
}

// Remaining reports how many responses are left.
func (s *Scripted) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries) - s.next
}

// cloneRequest copies req deeply enough that later changes by the caller
// to its slices do not show in the copy. Tool schemas are shared.
func cloneRequest(req *Request) Request {
	c := *req
	c.Messages = slices.Clone(req.Messages)
	for i := range c.Messages {
		c.Messages[i].ToolCalls = slices.Clone(c.Messages[i].ToolCalls)
	}
	c.Tools = slices.Clone(req.Tools)
	if req.Temperature != nil {
		t := *req.Temperature
		c.Temperature = &t
	}
	return c
}
