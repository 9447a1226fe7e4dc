package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/orchestra-mcp/orchestra/server"
)

// showAgents prints the app's agents.
func showAgents(env *cliEnv, app *server.App, asJSON bool) int {
	type entry struct {
		Name         string         `json:"name"`
		Tool         string         `json:"tool"`
		Description  string         `json:"description"`
		Model        string         `json:"model"`
		Tools        []string       `json:"tools"`
		Globs        []string       `json:"globs"`
		MaxToolSteps int            `json:"max_tool_steps,omitempty"`
		Actions      []string       `json:"actions,omitempty"`
		OutputSchema map[string]any `json:"output_schema,omitempty"`
		Expose       bool           `json:"expose"`
	}
	out := []entry{}
	for _, a := range app.Agents() {
		e := entry{Name: a.Name, Tool: a.Tool().Name, Description: a.Config.Description, Model: a.ModelName(), Tools: []string{},
			Globs: a.Config.Tools, MaxToolSteps: a.Config.MaxToolSteps, OutputSchema: a.Config.OutputSchema, Expose: a.Config.Expose}
		for _, t := range a.AllowedTools() {
			e.Tools = append(e.Tools, t.Name)
		}
		for n := range a.Config.Actions {
			e.Actions = append(e.Actions, n)
		}
		if e.Globs == nil {
			e.Globs = []string{}
		}
		out = append(out, e)
	}
	if asJSON {
		writeJSON(env.stdout, map[string]any{"agents": out})
		return ExitOK
	}
	if len(out) == 0 {
		fmt.Fprintln(env.stdout, "No agents are configured: add an agents block to the configuration file (see the README, section Agents).")
		return ExitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tTOOL\tMODEL\tEXPOSED\tALLOWED TOOLS")
	for _, e := range out {
		model := e.Model
		if model == "" {
			model = "(per call: the tenant's planner, else the client's through sampling)"
		}
		tools := strings.Join(e.Tools, ", ")
		if tools == "" {
			tools = "(none)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", e.Name, e.Tool, model, e.Expose, tools)
	}
	tw.Flush()
	return ExitOK
}
