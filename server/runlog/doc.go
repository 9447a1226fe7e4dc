// Package runlog writes the lines of runs: engine hooks that log each
// run's start, plan, steps, pauses and end with the ids that tie the lines
// together (request_id, exec_id, step_id, tool), to the server's logger
// ([Hooks]) and, as MCP logging notifications, to the client of one
// request at the level it asked for ([ClientHooks]). [Levels] knows which
// clients asked for lines, so that no line is built for a client that
// will not get it.
//
//	hooks := orchestrate.ComposeHooks(runlog.Hooks(logger), runlog.ClientHooks(ctx, req, redact, &levels))
package runlog
