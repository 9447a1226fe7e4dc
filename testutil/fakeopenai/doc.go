// Package fakeopenai is a local fake of an OpenAI-compatible Chat
// Completions server (POST /v1/chat/completions) for tests: each answer is
// computed from the request by the test's own function, so that a test
// drives models by what they are asked (the system prompt names the agent,
// tool results tell how far it got) rather than by a fixed script, and
// concurrent model callers need no ordering.
//
//	srv := fakeopenai.New(t, func(ctx context.Context, r *fakeopenai.Request) fakeopenai.Reply {
//		if len(r.ToolResults()) == 0 {
//			return fakeopenai.Call("filesystem__read_text_file", `{"path": "notes.txt"}`)
//		}
//		return fakeopenai.Text("done")
//	})
//	// planner: {provider: openai, model: fake, base_url: srv.URL()}
package fakeopenai
