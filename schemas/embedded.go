package schemas

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
)

var (
	//go:embed orchestrate_input.json
	orchestrateInputJSON []byte
	//go:embed envelope.json
	envelopeJSON []byte
	//go:embed envelope_lean.json
	envelopeLeanJSON []byte
)

// OrchestrateInput returns the input schema of agent_orchestrate. Each call
// returns a fresh copy.
func OrchestrateInput() *jsonschema.Schema {
	return mustParse("orchestrate_input.json", orchestrateInputJSON)
}

// Envelope returns the complete schema of the artifact envelope, every
// field described, for full and compact responses alike. Each call returns
// a fresh copy.
func Envelope() *jsonschema.Schema { return mustParse("envelope.json", envelopeJSON) }

// EnvelopeLean returns the outputSchema agent_orchestrate publishes: the
// fields a caller relies on, in few characters (every client pays for the
// definition). Every envelope that matches [Envelope] matches it. Each
// call returns a fresh copy.
func EnvelopeLean() *jsonschema.Schema { return mustParse("envelope_lean.json", envelopeLeanJSON) }

func mustParse(name string, data []byte) *jsonschema.Schema {
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", name, err))
	}
	return &s
}
