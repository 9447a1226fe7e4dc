package fakeopenai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Request is a Chat Completions request as the fake reads it.
type Request struct {
	Model          string          `json:"model"`
	Messages       []Message       `json:"messages"`
	Tools          []Tool          `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
	// Stream is set when the client asked for server-sent events; the
	// fake then streams its reply (see [Reply.Piece]).
	Stream bool `json:"stream"`
}

// Message is one message of a request.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
}

// Content is a message's content: a string, or text parts joined.
type Content string

// UnmarshalJSON reads a string or an array of text parts.
func (c *Content) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*c = Content(s)
		return nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return nil // null or something else: no text
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	*c = Content(b.String())
	return nil
}

// ToolCall is a call of a tool, in a request's assistant message or in a
// reply.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is a tool offered in a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"function"`
}

// System returns the request's system messages, joined.
func (r *Request) System() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "system" || m.Role == "developer" {
			parts = append(parts, string(m.Content))
		}
	}
	return strings.Join(parts, "\n")
}

// User returns the first user message.
func (r *Request) User() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return string(m.Content)
		}
	}
	return ""
}

// ToolResults returns the contents of the tool messages, in order.
func (r *Request) ToolResults() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "tool" {
			out = append(out, string(m.Content))
		}
	}
	return out
}

// ToolNames returns the names of the tools offered.
func (r *Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// Reply is the fake model's answer: text, tool calls, or an HTTP error.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// Status, when not 0 or 200, answers with this HTTP status and Text as
	// the error message.
	Status int
	// InputTokens and OutputTokens are reported as usage; default 10 and 5.
	InputTokens, OutputTokens int
	// Piece is how many characters of text or arguments each chunk of a
	// streamed reply carries; default 8.
	Piece int
}

// Text is a reply with text.
func Text(s string) Reply { return Reply{Text: s} }

// Call is a reply that calls the tool name with the JSON arguments args.
func Call(name, args string) Reply {
	var tc ToolCall
	tc.Type = "function"
	tc.Function.Name, tc.Function.Arguments = name, args
	return Reply{ToolCalls: []ToolCall{tc}}
}

// Server is a running fake. Its zero value is not usable; call New.
type Server struct {
	srv    *httptest.Server
	answer func(ctx context.Context, r *Request) Reply
	mu     sync.Mutex
	reqs   []*Request
	n      int
}

// New starts a fake that answers every request with answer, called with
// the HTTP request's context (cancelled when the client goes away). It is
// closed when the test ends.
func New(t testing.TB, answer func(ctx context.Context, r *Request) Reply) *Server {
	s := &Server{answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to configure (base_url), ending in /v1.
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	if hr.Method != http.MethodPost || !strings.HasSuffix(hr.URL.Path, "/chat/completions") {
		http.Error(w, `{"error": {"message": "not found"}}`, http.StatusNotFound)
		return
	}
	var r Request
	if err := json.NewDecoder(hr.Body).Decode(&r); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, &r)
	s.n++
	n := s.n
	s.mu.Unlock()
	rep := s.answer(hr.Context(), &r)
	if hr.Context().Err() != nil {
		return // the client went away
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		writeError(w, rep.Status, rep.Text)
		return
	}
	if rep.InputTokens == 0 && rep.OutputTokens == 0 {
		rep.InputTokens, rep.OutputTokens = 10, 5
	}
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		calls := make([]ToolCall, len(rep.ToolCalls))
		for i, tc := range rep.ToolCalls {
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", n, i)
			}
			tc.Type = "function"
			calls[i] = tc
		}
		msg["tool_calls"] = calls
		if rep.Text == "" {
			msg["content"] = nil
		}
		finish = "tool_calls"
	}
	if r.Stream {
		writeStream(w, n, r.Model, rep, msg, finish)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 0, "model": r.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": rep.InputTokens, "completion_tokens": rep.OutputTokens, "total_tokens": rep.InputTokens + rep.OutputTokens},
	})
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

// writeStream answers as a streaming server does: server-sent events of
// chat.completion.chunk objects, the text and each call's arguments cut in
// pieces of rep.Piece characters, then the finish reason, the usage and
// [DONE].
func writeStream(w http.ResponseWriter, n int, model string, rep Reply, msg map[string]any, finish string) {
	w.Header().Set("Content-Type", "text/event-stream")
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	if n == 0 {
		id = "chatcmpl"
	}
	send := func(choices []any, usage any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": choices}
		if usage != nil {
			chunk["usage"] = usage
		}
		data, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", data)
		flush()
	}
	delta := func(d map[string]any) { send([]any{map[string]any{"index": 0, "delta": d}}, nil) }
	piece := rep.Piece
	if piece <= 0 {
		piece = 8
	}
	delta(map[string]any{"role": "assistant", "content": ""})
	for _, p := range pieces(rep.Text, piece) {
		delta(map[string]any{"content": p})
	}
	calls, _ := msg["tool_calls"].([]ToolCall)
	for i, tc := range calls {
		delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Function.Name, "arguments": ""}}}})
		for _, p := range pieces(tc.Function.Arguments, piece) {
			delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}})
		}
	}
	send([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil)
	send([]any{}, map[string]any{"prompt_tokens": rep.InputTokens, "completion_tokens": rep.OutputTokens, "total_tokens": rep.InputTokens + rep.OutputTokens})
	fmt.Fprint(w, "data: [DONE]\n\n")
	flush()
}

// pieces cuts s into pieces of n characters (runes, for JSON strings cannot
// carry half a character).
func pieces(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// Respond writes completion, a chat.completion object, as a server does:
// as is, or, when the request asked to stream, as server-sent events of
// chat.completion.chunk objects carrying the same answer. Tests with
// fakes of their own answer through it.
func Respond(w http.ResponseWriter, stream bool, completion []byte) {
	var cc struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if !stream || json.Unmarshal(completion, &cc) != nil || len(cc.Choices) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Write(completion)
		return
	}
	rep := Reply{InputTokens: cc.Usage.PromptTokens, OutputTokens: cc.Usage.CompletionTokens}
	msg := cc.Choices[0].Message
	if text, ok := msg["content"].(string); ok {
		rep.Text = text
	}
	out := map[string]any{}
	if calls, ok := msg["tool_calls"].([]any); ok {
		data, _ := json.Marshal(calls)
		var tcs []ToolCall
		json.Unmarshal(data, &tcs)
		out["tool_calls"] = tcs
	}
	writeStream(w, 0, cc.Model, rep, out, cc.Choices[0].FinishReason)
}
