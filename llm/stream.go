package llm

import (
	"context"
	"errors"
	"fmt"
)

// errNoEvents reports a streaming request answered with no events: a
// server that does not stream answers with one JSON body.
var errNoEvents = errors.New("the server answered the streaming request with no events (it may not stream)")

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
