package builtin

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// askUserInput documents the arguments of ask_user.
type askUserInput struct {
	Message string         `json:"message" jsonschema:"The question, for a person."`
	Schema  map[string]any `json:"schema,omitempty" jsonschema:"A flat object JSON Schema of the answer's form (string, number, boolean, enum fields); none asks for a yes or no."`
}

// askUserOutput documents the structured output of ask_user.
type askUserOutput struct {
	Action  string         `json:"action" jsonschema:"accept, decline or cancel."`
	Content map[string]any `json:"content,omitempty" jsonschema:"The answer's fields, when accepted."`
}

const askUserDescription = `Ask the user a question and wait for the answer (MCP elicitation). Output {"action": "accept"|"decline"|"cancel", "content": {...}}; decline and cancel fail the step with code declined, so a later destructive step runs only when the user accepted.

Without elicitation in the client, the plan pauses here and the client answers with the same output when it resumes.`

// AskUser returns the ask_user tool. It is client-final: the engine asks
// the user through the calling client (elicitation) or pauses the run for
// the client to answer; it is never called on the server.
func AskUser() registry.Tool {
	return registry.Tool{
		Name:         "ask_user",
		Title:        "Ask the user",
		Description:  askUserDescription,
		InputSchema:  schemaFor[askUserInput](),
		OutputSchema: schemaFor[askUserOutput](),
		Annotations:  &mcp.ToolAnnotations{Title: "Ask the user", ReadOnlyHint: true, OpenWorldHint: new(false)},
		Mode:         registry.ClientFinal,
		Call: func(context.Context, *registry.CallRequest) (*registry.Result, error) {
			return registry.ErrorResult("ask_user asks through a plan of agent_orchestrate: call it from a plan step"), nil
		},
	}
}
