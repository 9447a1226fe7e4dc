//go:build !no_anthropic

package llm

import (
	"context"

	"github.com/anthropics/anthropic-sdk-go"
)

// GenerateStream implements [StreamModel] with the Messages stream.
func (m *anthropicModel) GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	return generate(ctx, &m.sdkModel, req, true, m.params, anthropicError, func(ctx context.Context, op string, p anthropic.MessageNewParams) (*Response, error) {
		stream := m.svc.NewStreaming(ctx, p)
		defer stream.Close()
		var msg anthropic.Message
		calls := map[int64]int{} // content block index → Delta.Call
		events := 0
		for stream.Next() {
			events++
			ev := stream.Current()
			if err := msg.Accumulate(ev); err != nil {
				return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: err}
			}
			switch ev := ev.AsAny().(type) {
			case anthropic.ContentBlockStartEvent:
				if ev.ContentBlock.Type == "tool_use" {
					i := len(calls)
					calls[ev.Index] = i
					onDelta(Delta{Call: i, Name: ev.ContentBlock.Name})
				}
			case anthropic.ContentBlockDeltaEvent:
				switch d := ev.Delta.AsAny().(type) {
				case anthropic.TextDelta:
					onDelta(Delta{Text: d.Text})
				case anthropic.InputJSONDelta:
					if i, ok := calls[ev.Index]; ok && d.PartialJSON != "" {
						onDelta(Delta{Call: i, Arguments: d.PartialJSON})
					}
				}
			}
		}
		if err := stream.Err(); err != nil {
			return nil, err
		}
		if events == 0 {
			return nil, &Error{Provider: ProviderAnthropic, Op: op, Kind: ErrBadResponse, Err: errNoEvents}
		}
		return anthropicResponse(&msg)
	})
}
