package builtin

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// askUserInput documents the arguments of ask_user.
type askUserInput struct {
	Message  string         `json:"message" jsonschema:"The question, for a person."`
	Schema   map[string]any `json:"schema,omitempty" jsonschema:"A flat object JSON Schema of the answer's form (string, number, boolean, enum fields); none asks for a yes or no."`
	IfNoUser string         `json:"if_no_user,omitempty" jsonschema:"When no user can be asked (the client has no elicitation): fail (the default: the step fails with user_unavailable, so nothing it gates runs) or pause (the run pauses and the calling model answers; its answer is not the user's decision)."`
}

// askUserOutput documents the structured output of ask_user.
type askUserOutput struct {
	Action  string         `json:"action" jsonschema:"accept, decline or cancel."`
	Content map[string]any `json:"content,omitempty" jsonschema:"The answer's fields, when accepted."`
}

const askUserDescription = `Ask the user a question. It asks through MCP elicitation and waits for the answer: {"action": "accept"|"decline"|"cancel", "content": {...}}; decline and cancel fail the step with code declined, so a later destructive step runs only when the user accepted.

When no user can be asked (the client has no elicitation), the step fails with code user_unavailable. With "if_no_user": "pause" the run pauses instead and the calling model answers when it resumes: use it only for what the model may decide, never as a user's consent.`

// AskUser returns the ask_user tool. It is client-final: the engine asks
// the user through the calling client (elicitation, or the protocol's
// input requests when the run pauses for it), fails the step when no user
// can be asked, or, when the plan says so, pauses the run for the calling
// model to answer; it is never called on the server.
func AskUser() registry.Tool {
	in := schemaFor[askUserInput]()
	in.Properties["if_no_user"].Enum = []any{"fail", "pause"}
	return registry.Tool{
		Name:         "ask_user",
		Title:        "Ask the user",
		Description:  askUserDescription,
		InputSchema:  in,
		OutputSchema: schemaFor[askUserOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Ask the user", ReadOnlyHint: true, OpenWorldHint: new(false)},
		Mode:         registry.ClientFinal,
		Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) {
			return registry.ErrorResult("ask_user asks through a plan of agent_orchestrate: call it from a plan step"), nil
		},
	}
}
