package planner

import (
	"encoding/json"

	"github.com/orchestra-mcp/orchestra/internal/textcut"
	"github.com/orchestra-mcp/orchestra/orchestrate"
)

// maxRespondOutput caps each output RESPOND is shown.
const maxRespondOutput = 8 << 10

// respondRecord is what RESPOND writes the answer from: the run's status,
// its problems, the steps that did not succeed, and only the outputs the
// answer needs (the plan's return value, or else the outputs no later step
// consumed), each capped at maxRespondOutput bytes of JSON.
func respondRecord(env *orchestrate.Envelope) map[string]any {
	a := env.Artifact
	record := map[string]any{"status": a.Status}
	outputs := map[string]any{}
	for id, out := range env.NeededOutputs() {
		data, err := json.Marshal(out)
		if err != nil {
			continue
		}
		if len(data) > maxRespondOutput {
			outputs[id] = textcut.Truncate(string(data), maxRespondOutput)
			continue
		}
		outputs[id] = json.RawMessage(data)
	}
	if len(outputs) > 0 {
		record["outputs"] = outputs
	}
	notOK := map[string]string{}
	var walk func([]*orchestrate.StepRecord)
	walk = func(rs []*orchestrate.StepRecord) {
		for _, r := range rs {
			if r.Status != orchestrate.StatusSuccess && len(r.Children) == 0 {
				notOK[r.ID] = r.Status
			}
			walk(r.Children)
		}
	}
	walk(a.Steps)
	if len(notOK) > 0 {
		record["steps_not_succeeded"] = notOK
	}
	if len(a.Errors) > 0 {
		record["errors"] = a.Errors
	}
	if len(a.ValidationErrors) > 0 {
		record["validation_errors"] = a.ValidationErrors
	}
	return record
}
