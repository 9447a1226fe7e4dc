package orchestrate

import (
	"context"
	"strings"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
)

// MaxInstructionBytes caps each layer of Instructions (about 2,000 tokens
// at 4 bytes a token): a configured layer longer than it is refused when
// the configuration loads, a request's is cut to it.
const MaxInstructionBytes = 8000

// Instructions are the layers of instructions a model is given for a
// request, rendered in this order in the planning request, the answer's
// (RESPOND) and an agent's: the operator's (planner.instructions), the
// caller's tenant's (tenants.<name>.instructions), then the request's own
// (context.instructions).
type Instructions struct {
	// Operator is planner.instructions, for every caller.
	Operator string
	// Tenant is the instructions of the caller's tenant.
	Tenant string
	// Caller is the request's context.instructions.
	Caller string
}

// Headings of the layers, as the models read them.
const (
	instructionsOperator = "Instructions from the operator:"
	instructionsTenant   = "Instructions for the caller's organisation:"
	instructionsCaller   = "Instructions from the caller:"
)

// Render returns the non-empty layers, each under its heading and cut to
// MaxInstructionBytes, in order; "" when all are empty.
func (in Instructions) Render() string {
	var parts []string
	for _, l := range [...]struct{ head, text string }{
		{instructionsOperator, in.Operator},
		{instructionsTenant, in.Tenant},
		{instructionsCaller, in.Caller},
	} {
		if s := InstructionLayer(l.head, l.text); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Configured returns in without its Caller layer: the layers the
// configuration sets.
func (in Instructions) Configured() Instructions {
	return Instructions{Operator: in.Operator, Tenant: in.Tenant}
}

// CallerInstructions renders the request's own layer alone, as Render
// would, for a budget that counts it with the rest of the caller's context.
func CallerInstructions(text string) string { return InstructionLayer(instructionsCaller, text) }

// InstructionLayer renders one layer under head, cut to
// MaxInstructionBytes; "" when text is blank.
func InstructionLayer(head, text string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	return head + "\n" + textcut.Truncate(text, MaxInstructionBytes)
}

type instructionsKey struct{}

// WithInstructions returns ctx carrying the instructions of its request,
// for the agents its plan runs.
func WithInstructions(ctx context.Context, in Instructions) context.Context {
	return context.WithValue(ctx, instructionsKey{}, in)
}

// InstructionsFrom returns the instructions ctx carries.
func InstructionsFrom(ctx context.Context) (Instructions, bool) {
	in, ok := ctx.Value(instructionsKey{}).(Instructions)
	return in, ok
}
