//go:build !no_openai

package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
)

// GenerateStream implements [StreamModel] with the Chat Completions
// stream, asking for the usage in its last chunk. A server that answers
// with one JSON body instead (it does not stream) has answered all the
// same: the answer is taken from the body and handed to onDelta whole.
func (m *openAIModel) GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	return generate(ctx, &m.sdkModel, req, true, m.params, openAIError, func(ctx context.Context, op string, p openai.ChatCompletionNewParams) (*Response, error) {
		p.StreamOptions.IncludeUsage = param.NewOpt(true)
		var whole jsonAnswer
		stream := m.svc.NewStreaming(ctx, p, option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return whole.catch(next(r))
		}))
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		calls := map[int64]int{} // the stream's tool call index → Delta.Call
		chunks := 0
		answer := answerCounter{limit: m.cfg.maxResponseBytes()}
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
				var ds []Delta
				if ch.Delta.Content != "" {
					ds = append(ds, Delta{Text: ch.Delta.Content})
				}
				for _, tc := range ch.Delta.ToolCalls {
					i, ok := calls[tc.Index]
					if !ok {
						i = len(calls)
						calls[tc.Index] = i
					}
					if tc.Function.Name != "" || tc.Function.Arguments != "" {
						ds = append(ds, Delta{Call: i, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
					}
				}
				// The text and arguments count against the answer's
				// limit as they arrive: an endless stream ends there.
				for _, d := range ds {
					if err := answer.add(d); err != nil {
						return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: err}
					}
					onDelta(d)
				}
			}
		}
		if err := stream.Err(); err != nil {
			return nil, err
		}
		cc := &acc.ChatCompletion
		if chunks == 0 {
			if whole.body == nil {
				return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: errNoEvents}
			}
			cc = &openai.ChatCompletion{}
			if err := json.Unmarshal(whole.body, cc); err != nil {
				return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: fmt.Errorf("the server answered the streaming request with a JSON body that is no chat completion: %w", err)}
			}
		}
		resp, err := openAIResponse(cc)
		if err != nil {
			return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: err}
		}
		if chunks == 0 {
			replay(resp, onDelta)
		}
		return resp, nil
	})
}
