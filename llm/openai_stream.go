//go:build !no_openai

package llm

import (
	"context"
	"errors"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
)

// GenerateStream implements [StreamModel] with the Chat Completions
// stream, asking for the usage in its last chunk.
func (m *openAIModel) GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	return generate(ctx, &m.sdkModel, req, true, m.params, openAIError, func(ctx context.Context, op string, p openai.ChatCompletionNewParams) (*Response, error) {
		p.StreamOptions.IncludeUsage = param.NewOpt(true)
		stream := m.svc.NewStreaming(ctx, p)
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		calls := map[int64]int{} // the stream's tool call index → Delta.Call
		chunks := 0
		for stream.Next() {
			chunks++
			chunk := stream.Current()
			if !acc.AddChunk(chunk) {
				return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: errors.New("the stream sent a chunk that does not continue the answer")}
			}
			for _, ch := range chunk.Choices {
				if ch.Index != 0 {
					continue
				}
				if ch.Delta.Content != "" {
					onDelta(Delta{Text: ch.Delta.Content})
				}
				for _, tc := range ch.Delta.ToolCalls {
					i, ok := calls[tc.Index]
					if !ok {
						i = len(calls)
						calls[tc.Index] = i
					}
					if tc.Function.Name != "" || tc.Function.Arguments != "" {
						onDelta(Delta{Call: i, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
					}
				}
			}
		}
		if err := stream.Err(); err != nil {
			return nil, err
		}
		if chunks == 0 {
			return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: errNoEvents}
		}
		resp, err := openAIResponse(&acc.ChatCompletion)
		if err != nil {
			return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: err}
		}
		return resp, nil
	})
}
