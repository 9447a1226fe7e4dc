// Package llm puts model providers behind one small interface, [Model], for
// the planner that turns a natural-language goal into a plan.
//
// Providers:
//   - OpenAI-compatible Chat Completions ([NewOpenAI]): OpenAI, or with a base
//     URL Ollama, vLLM, llama.cpp, LM Studio, OpenRouter and the like.
//   - Anthropic Messages ([NewAnthropic]).
//   - A scripted model ([NewScripted], [LoadScript]) that returns prepared
//     responses in order and records the requests, for tests and demos.
//   - MCP sampling: the client's own model, through the session
//     ([NewSampling]) or, inside a tool handler on protocol 2026-07-28,
//     through multi round-trip input requests ([InputSampling]).
//
// The build tags no_openai and no_anthropic leave a provider's SDK out of
// the binary; its constructor then returns an error naming the tag.
//
// [New] builds the one a [Config] (the configuration file's planner block)
// names. Every error is an [*Error] that says what was being done and
// matches one of the sentinel errors ([ErrRateLimited], [ErrTimeout],
// [ErrAuth], [ErrBadRequest], ...) with [errors.Is]. The SDK providers retry
// rate limits and transient failures themselves, honouring Retry-After.
//
// A planner call offers one tool and requires it:
//
//	model, err := llm.New(llm.Config{Provider: "openai", Model: "gpt-4o-mini"}, llm.Options{Logger: logger})
//	if err != nil {
//		return err // e.g. "no API key: set the environment variable OPENAI_API_KEY ..."
//	}
//	resp, err := model.Generate(ctx, &llm.Request{
//		System:     "You write plans.",
//		Messages:   []llm.Message{{Role: llm.RoleUser, Content: goal}},
//		Tools:      []llm.ToolDef{{Name: "__planning__", Parameters: schema, Strict: true}},
//		ToolChoice: "__planning__",
//	})
//	if errors.Is(err, llm.ErrRateLimited) {
//		// back off, or fall back to another model
//	}
//	if err != nil {
//		return err
//	}
//	plan := resp.ToolCalls[0].Arguments
package llm
