//go:build !no_anthropic

package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// GenerateStream implements [StreamModel] with the Messages stream. A
// server that answers with one JSON body instead (it does not stream) has
// answered all the same: the answer is taken from the body and handed to
// onDelta whole.
func (m *anthropicModel) GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	return generate(ctx, &m.sdkModel, req, true, m.params, anthropicError, func(ctx context.Context, op string, p anthropic.MessageNewParams) (*Response, error) {
		var whole jsonAnswer
		stream := m.svc.NewStreaming(ctx, p, option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return whole.catch(next(r))
		}))
		defer stream.Close()
		var msg anthropic.Message
		calls := map[int64]int{} // content block index → Delta.Call
		events := 0
		answer := answerCounter{limit: m.cfg.maxResponseBytes()}
		// The SDK's accumulator appends text with +=, which costs the
		// square of the answer's pieces: text is gathered here instead,
		// and the pieces the answer does not use (thinking, signatures,
		// citations) are counted and dropped.
		texts := map[int64]*strings.Builder{}
		for stream.Next() {
			events++
			ev := stream.Current()
			if ev.Type == "content_block_delta" && ev.Delta.Type != "input_json_delta" {
				if ev.Index < 0 || ev.Index >= int64(len(msg.Content)) {
					return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: fmt.Errorf("the stream sent a delta for content block %d, which did not start", ev.Index)}
				}
				piece := ev.Delta.Text + ev.Delta.Thinking + ev.Delta.Signature + ev.Delta.Citation.RawJSON()
				if err := answer.add(Delta{Text: piece}); err != nil {
					return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: err}
				}
				if ev.Delta.Type == "text_delta" {
					b := texts[ev.Index]
					if b == nil {
						b = &strings.Builder{}
						texts[ev.Index] = b
					}
					b.WriteString(ev.Delta.Text)
					onDelta(Delta{Text: ev.Delta.Text})
				}
				continue
			}
			if err := msg.Accumulate(ev); err != nil {
				return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: err}
			}
			var d Delta
			switch ev := ev.AsAny().(type) {
			case anthropic.ContentBlockStartEvent:
				if ev.ContentBlock.Type != "tool_use" {
					continue
				}
				i := len(calls)
				calls[ev.Index] = i
				d = Delta{Call: i, Name: ev.ContentBlock.Name}
			case anthropic.ContentBlockDeltaEvent:
				x, isJSON := ev.Delta.AsAny().(anthropic.InputJSONDelta)
				i, ok := calls[ev.Index]
				if !isJSON || !ok || x.PartialJSON == "" {
					continue
				}
				d = Delta{Call: i, Arguments: x.PartialJSON}
			default:
				continue
			}
			if err := answer.add(d); err != nil {
				return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: err}
			}
			onDelta(d)
		}
		if err := stream.Err(); err != nil {
			return nil, err
		}
		if events > 0 {
			for i, b := range texts {
				if i < int64(len(msg.Content)) {
					msg.Content[i].Text += b.String()
				}
			}
			return anthropicResponse(&msg)
		}
		if whole.body == nil {
			return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: errNoEvents}
		}
		if err := json.Unmarshal(whole.body, &msg); err != nil || msg.Type != "message" {
			return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: fmt.Errorf("the server answered the streaming request with a JSON body that is no message: %.200s", whole.body)}
		}
		resp, err := anthropicResponse(&msg)
		if err != nil {
			return nil, err
		}
		replay(resp, onDelta)
		return resp, nil
	})
}
