package orchestrate

import (
	"fmt"

	"github.com/orchestra-mcp/orchestra/schemas"
)

var (
	clientToolFields = []string{"name", "description", "input_schema", "output_schema"}
	resumeFields     = []string{"exec_id", "results"}
)

// MaxClientTools caps the client tools one request declares: each is
// loaded (its schemas through the schema loader) and may be offered to a
// planner.
const MaxClientTools = 256

// clientTools decodes the request's client_tools.
func (d *decoder) clientTools(v any, path string) []*ClientTool {
	arr, ok := v.([]any)
	if !ok {
		if v != nil {
			d.add(path, CodeInvalidValue, fmt.Sprintf("client_tools must be an array of {name, description, input_schema, output_schema}, not %s", schemas.TypePhrase(v)))
		}
		return nil
	}
	if len(arr) > MaxClientTools {
		d.add(path, CodeInvalidValue, fmt.Sprintf("a request declares at most %d client tools, not %d; declare the ones this plan calls", MaxClientTools, len(arr)))
		return nil
	}
	out := make([]*ClientTool, 0, len(arr))
	for i, e := range arr {
		at := fmt.Sprintf("%s[%d]", path, i)
		obj, ok := e.(map[string]any)
		if !ok {
			d.add(at, CodeInvalidValue, fmt.Sprintf("a client tool is an object {name, description, input_schema, output_schema}, not %s", schemas.TypePhrase(e)))
			continue
		}
		ct := &ClientTool{}
		for _, k := range sortedKeys(obj) {
			val := obj[k]
			switch k {
			case "name":
				ct.Name = d.str(val, at+".name")
			case "description":
				ct.Description = d.str(val, at+".description")
			case "input_schema", "output_schema":
				if val == nil {
					continue
				}
				m, ok := d.values(val, at+"."+k).(map[string]any)
				if !ok {
					d.add(at+"."+k, CodeInvalidValue, fmt.Sprintf("%s must be a JSON Schema object, not %s", k, schemas.TypePhrase(val)))
					continue
				}
				if k == "input_schema" {
					ct.InputSchema = m
				} else {
					ct.OutputSchema = m
				}
			default:
				d.unknown(at, k, clientToolFields)
			}
		}
		if ct.Name == "" {
			d.add(at+".name", CodeMissingField, "a client tool needs a name, which plan steps call")
		}
		out = append(out, ct)
	}
	return out
}

// resume decodes the request's resume.
func (d *decoder) resume(v any, path string) *ResumeRequest {
	obj, ok := v.(map[string]any)
	if !ok {
		d.add(path, CodeInvalidValue, fmt.Sprintf(`resume must be an object {"exec_id": "...", "results": {...}}, not %s`, schemas.TypePhrase(v)))
		return nil
	}
	rs := &ResumeRequest{}
	for _, k := range sortedKeys(obj) {
		val := obj[k]
		switch k {
		case "exec_id":
			rs.ExecID = d.str(val, path+".exec_id")
		case "results":
			if val == nil {
				continue
			}
			m, ok := d.values(val, path+".results").(map[string]any)
			if !ok {
				d.add(path+".results", CodeInvalidValue, fmt.Sprintf("results must be an object of outputs by step id, not %s", schemas.TypePhrase(val)))
				continue
			}
			rs.Results = m
		default:
			d.unknown(path, k, resumeFields)
		}
	}
	if rs.ExecID == "" {
		d.add(path+".exec_id", CodeMissingField, "resume needs the exec_id of the run to continue")
	}
	return rs
}
