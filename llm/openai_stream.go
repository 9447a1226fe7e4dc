//go:build !no_openai

package llm

import (
	"context"
	"errors"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
)

// GenerateStream implements [StreamModel] with the Chat Completions
// stream, asking for the usage in its last chunk.
func (m *openAIModel) GenerateStream(ctx context.Context, req *Request, onDelta func(Delta)) (*Response, error) {
	op, params, err := m.request(req)
	if err != nil {
		return nil, err
	}
	params.StreamOptions.IncludeUsage = param.NewOpt(true)
	tctx, cancel := context.WithTimeout(ctx, m.cfg.timeout())
	defer cancel()
	start := time.Now()
	stream := m.svc.NewStreaming(tctx, params)
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
			for _, d := range ds {
				if err := answer.add(d); err != nil {
					return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: err}
				}
				onDelta(d)
			}
		}
	}
	if err := stream.Err(); err != nil {
		e := m.wrap(ctx, op, err)
		m.log.DebugContext(ctx, "model call failed", "model", m.Name(), "duration", time.Since(start), "error", e)
		return nil, e
	}
	if chunks == 0 {
		return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: errNoEvents}
	}
	resp, err := openAIResponse(&acc.ChatCompletion)
	if err != nil {
		return nil, &Error{Provider: ProviderOpenAI, Op: op, Kind: ErrBadResponse, Err: err}
	}
	m.log.DebugContext(ctx, "model call", "model", m.Name(), "duration", time.Since(start), "streamed", true,
		"input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens,
		"tool_calls", len(resp.ToolCalls), "stop_reason", resp.StopReason)
	return resp, nil
}
