// Package server assembles orchestra's MCP server: the agent_orchestrate
// tool in front of the plan engine, the tools of the catalog exposed
// directly, kept in step with the catalog as it changes, served over stdio
// or Streamable HTTP.
//
//	app, err := server.New(ctx, cfg, server.Options{Logger: logger, Version: "1.0.0"})
//	if err != nil { ... }
//	defer app.Close()
//	err = app.ServeStdio(ctx, os.Stdin, os.Stdout)
package server
