package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// errNoEvents reports a streaming request answered with no events: a
// server that does not stream answers with one JSON body.
var errNoEvents = errors.New("the server answered the streaming request with no events (it may not stream)")

// maxJSONBody caps the one JSON body a server may answer a streaming
// request with.
const maxJSONBody = 64 << 20

// jsonAnswer keeps the answer of a server that answers a streaming request
// with one JSON body, as servers that do not stream do (several
// OpenAI-compatible ones): the answer is in it, and asking again without
// streaming would cost a second model call.
type jsonAnswer struct {
	body []byte // nil: the server streamed, or failed
}

// catch is an HTTP middleware's handling of the response of a streaming
// request: a successful one with a JSON content type is read whole into
// a.body and handed on empty, so that the stream decoder finds no events
// and the provider decodes a.body instead.
func (a *jsonAnswer) catch(res *http.Response, err error) (*http.Response, error) {
	if err != nil || res == nil || res.StatusCode/100 != 2 {
		return res, err
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	if mt != "application/json" {
		return res, nil
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxJSONBody+1))
	res.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(data) > maxJSONBody {
		return nil, fmt.Errorf("the answer is over %d MiB", maxJSONBody>>20)
	}
	a.body = data
	res.Body = io.NopCloser(bytes.NewReader(nil))
	return res, nil
}

// replay calls onDelta with the answer resp holds, in the pieces a stream
// of it would have: its text, then each tool call whole.
func replay(resp *Response, onDelta func(Delta)) {
	if resp.Text != "" {
		onDelta(Delta{Text: resp.Text})
	}
	for i, tc := range resp.ToolCalls {
		onDelta(Delta{Call: i, Name: tc.Name, Arguments: string(tc.Arguments)})
	}
}

// Delta is one piece of an answer as a provider streams it: text, or the
// next piece of a tool call's argument text.
type Delta struct {
	// Call is the position of the tool call the piece belongs to among the
	// answer's tool calls, counted from 0 in the order they began; it is
	// meaningful only when Name or Arguments is set.
	Call int
	// Name is the tool's name; providers send it with a call's first piece.
	Name string
	// Arguments is the next piece of the call's argument text (JSON, cut
	// anywhere, even inside a UTF-8 sequence).
	Arguments string
	// Text is the next piece of the answer's text.
	Text string
}

// StreamModel is a [Model] that can stream its answer.
//
// GenerateStream makes the same call as Generate and returns the same
// [Response]; while the answer arrives it calls onDelta with each piece, on
// the calling goroutine and in order. onDelta must not block for long: the
// provider's connection waits for it.
type StreamModel interface {
	Model
	GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error)
}

// StreamScript says how a [Scripted] model streams its answers; see
// [Scripted.Streaming].
type StreamScript struct {
	// Split cuts the argument text of a tool call into the pieces sent one
	// after the other; nil cuts it every 16 bytes.
	Split func(args string) []string
	// Before, when set, runs before piece n of tool call i is sent; an error
	// ends the call with that error. Tests gate the stream with it.
	Before func(ctx context.Context, call, piece int) error
}

// ScriptedStream is a [Scripted] model that streams; it shares the script
// and the recorded requests of the model it was made from.
type ScriptedStream struct {
	*Scripted
	script StreamScript
}

// Streaming returns a model that answers as s does and streams each answer:
// the text in one piece, then each tool call's arguments in the pieces
// script cuts them into.
func (s *Scripted) Streaming(script StreamScript) *ScriptedStream {
	return &ScriptedStream{Scripted: s, script: script}
}

// GenerateStream implements [StreamModel].
func (s *ScriptedStream) GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	resp, err := s.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Text != "" {
		onDelta(Delta{Text: resp.Text})
	}
	split := s.script.Split
	if split == nil {
		split = func(args string) []string { return chunks(args, 16) }
	}
	for i, tc := range resp.ToolCalls {
		pieces := split(string(tc.Arguments))
		if len(pieces) == 0 {
			pieces = []string{""}
		}
		for n, piece := range pieces {
			if s.script.Before != nil {
				if err := s.script.Before(ctx, i, n); err != nil {
					return nil, &Error{Provider: ProviderScripted, Op: fmt.Sprintf("streaming tool call %d", i+1), Err: err, Kind: ErrUnavailable}
				}
			}
			d := Delta{Call: i, Arguments: piece}
			if n == 0 {
				d.Name = tc.Name
			}
			onDelta(d)
		}
	}
	return resp, nil
}

// chunks cuts s every n bytes.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
