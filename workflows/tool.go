package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/orchestrate"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/schemas"
)

// ToolOptions configure the tools of workflows.
type ToolOptions struct {
	// Engine runs the plans; its catalog is what they are checked against.
	Engine *orchestrate.Engine
	// Resolve returns the newest version of the workflow name that the
	// caller of ctx may call: a call runs that one, even when it was saved
	// after the tool was listed. An error says it is unknown to the caller.
	Resolve func(ctx context.Context, name string) (*Workflow, error)
}

// Tool returns the catalog tool of w, workflow__<name>: its inputSchema is
// w's parameters and its outputSchema the one of its plan's return. A
// call runs the newest version Resolve gives, with no model call: the
// arguments are checked against the parameters (defaults filled in), the
// plan against the catalog as it is now, and only then does the plan run,
// as a run of its own under its caller's budget, depth and tools, recorded
// as workflow__<name>@<version>.
func Tool(w *Workflow, opts ToolOptions) registry.Tool {
	name := w.Name
	desc := w.Description
	if desc == "" {
		desc = "Runs the workflow " + name + "."
	}
	desc += " A saved plan: a call runs its steps with no model call (version " + strconv.Itoa(w.Version) + ")."
	if p, err := w.DecodePlan(); err == nil {
		desc += " Calls " + describeTools(p) + "."
	}
	t := tool(name, opts)
	t.Description = desc
	t.InputSchema = w.Parameters
	t.OutputSchema = w.OutputSchema(opts.Engine.Tools())
	return t
}

// SharedTool returns the catalog tool of the workflow name when whose it is
// depends on the caller (stored workflows, whose names are per owner and
// tenant; a configured one kept to some tenants): it describes no one's
// workflow, takes any object, and a call runs the workflow Resolve gives
// its caller, its arguments checked against that one's parameters. Each
// caller is shown its own workflow's tool in its place.
func SharedTool(name string, opts ToolOptions) registry.Tool {
	t := tool(name, opts)
	t.Description = "Runs your workflow " + name + ", a saved plan, with no model call."
	t.InputSchema = &jsonschema.Schema{Type: "object"}
	return t
}

// tool returns what the tools of workflow name share: their name, title
// and annotations, and a call that runs the workflow Resolve gives.
func tool(name string, opts ToolOptions) registry.Tool {
	return registry.Tool{
		Name:        ToolName(name),
		Title:       "Workflow " + name,
		Annotations: &mcp.ToolAnnotations{Title: "Workflow " + name, OpenWorldHint: new(true)},
		Source:      Source,
		Call: func(ctx context.Context, cr *registry.CallRequest) (*registry.Result, error) {
			w, err := opts.Resolve(ctx, name)
			if err != nil {
				return registry.ErrorResult(err.Error()), nil
			}
			return w.call(ctx, opts.Engine, cr.Arguments), nil
		},
	}
}

// call runs w with args; see Tool.
func (w *Workflow) call(ctx context.Context, e *orchestrate.Engine, args map[string]any) *registry.Result {
	bindings, err := w.Arguments(args)
	if err != nil {
		return registry.ErrorResult(err.Error())
	}
	if err := w.Check(e); err != nil {
		return registry.ErrorResult(err.Error())
	}
	p, err := w.DecodePlan()
	if err != nil {
		return registry.ErrorResult(err.Error())
	}
	obj := returnsObject(p) // before the run, which may annotate p
	env := e.With(orchestrate.RunOptions{Source: w.RunSource()}).Run(ctx, &orchestrate.Request{Plan: p, Bindings: bindings})
	return w.result(env, obj)
}

// RunSource is what w's runs are recorded as started by.
func (w *Workflow) RunSource() string { return ToolName(w.Name) + "@" + strconv.Itoa(w.Version) }

// Arguments checks args against w's parameters, with their defaults
// filled in, and returns the bindings a run gets.
func (w *Workflow) Arguments(args map[string]any) (map[string]any, error) {
	bindings := make(map[string]any, len(args))
	maps.Copy(bindings, args)
	rs, err := schemas.Resolve(w.Parameters)
	if err != nil {
		return nil, fmt.Errorf("workflow %s version %d: its parameters' schema does not resolve: %w", w.Name, w.Version, err)
	}
	if err := rs.ApplyDefaults(&bindings); err != nil {
		return nil, fmt.Errorf("workflow %s version %d: filling in defaults: %w", w.Name, w.Version, err)
	}
	if err := rs.Validate(bindings); err != nil {
		return nil, fmt.Errorf("arguments of %s (version %d): %s; its inputSchema lists the parameters", ToolName(w.Name), w.Version, schemas.CleanError(err))
	}
	return bindings, nil
}

// result turns a run's envelope into the tool's result: the return value
// (or answer) as structured content when it succeeded, what went wrong
// otherwise. returnsObject is whether the plan writes its return out as an
// object.
func (w *Workflow) result(env *orchestrate.Envelope, returnsObject bool) *registry.Result {
	a := env.Artifact
	if a == nil {
		return registry.ErrorResult(fmt.Sprintf("workflow %s version %d: the run returned no artifact", w.Name, w.Version))
	}
	if !a.Success {
		var msgs []string
		for _, is := range a.ValidationErrors {
			msgs = append(msgs, string(is.Code)+": "+is.Message)
		}
		for _, e := range a.Errors {
			msgs = append(msgs, e.Error())
		}
		return registry.ErrorResult(fmt.Sprintf("workflow %s version %d %s (exec %s): %s", w.Name, w.Version, a.Status, env.Metadata.ExecID, strings.Join(msgs, "; ")))
	}
	var out any
	switch {
	case a.Result != nil:
		if m, ok := a.Result.(map[string]any); ok && returnsObject {
			out = m
		} else {
			out = map[string]any{"result": a.Result}
		}
	case a.Answer != "":
		out = map[string]any{"answer": a.Answer}
	}
	if out == nil {
		text, _ := json.Marshal(a.Steps)
		return registry.TextResult(string(text))
	}
	text, err := json.Marshal(out)
	if err != nil {
		return registry.ErrorResult(fmt.Sprintf("workflow %s version %d: encoding its result: %v", w.Name, w.Version, err))
	}
	if a.Answer != "" && a.Result == nil {
		text = []byte(a.Answer)
	}
	r := registry.TextResult(string(text))
	r.Structured = out
	return r
}

// returnsObject reports that plan p returns an object it writes out,
// which is then the tool's structured content itself (see OutputSchema).
func returnsObject(p *orchestrate.Plan) bool {
	_, ok := p.Return.(map[string]any)
	return ok
}
