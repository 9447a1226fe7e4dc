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
)

// OrchestrateInput returns the input schema of agent_orchestrate. Each call
// returns a fresh copy.
func OrchestrateInput() *jsonschema.Schema {
	return mustParse("orchestrate_input.json", orchestrateInputJSON)
}

// Envelope returns the schema of the artifact envelope, the output of
// agent_orchestrate. Each call returns a fresh copy.
func Envelope() *jsonschema.Schema { return mustParse("envelope.json", envelopeJSON) }

func mustParse(name string, data []byte) *jsonschema.Schema {
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		panic(fmt.Sprintf("embedded schema %s: %v", name, err))
	}
	return &s
}
