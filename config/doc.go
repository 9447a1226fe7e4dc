// Package config loads orchestra's configuration file: limits, built-in tool
// settings, the downstream MCP servers and the planner.
//
// The file is YAML or JSON (JSON is read as YAML). Unknown keys are errors
// that name the key and where it is, so a typo never goes unnoticed.
// ${NAME} in a string value is replaced by the environment variable NAME
// (${NAME:-default} gives a default); a variable that is not set is an error.
//
//	cfg, err := config.Load("orchestra.yaml")
//	if err != nil {
//		return err // e.g. `orchestra.yaml:3: unknown key "max_step" in limits; did you mean "max_steps"?`
//	}
//	eng := orchestrate.NewEngine(orchestrate.Options{Limits: cfg.EngineLimits()})
package config
