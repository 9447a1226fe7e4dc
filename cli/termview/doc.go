// Package termview shows runs on a terminal while they happen, the way
// `docker build` or `go test -v` do: the steps that are running, each with
// its elapsed time, and those that ended, with their status and duration.
//
// A [View] is fed by the engine's lifecycle hooks ([View.Hooks], an
// [orchestrate.Hooks] like the ones that keep records and logs): a step
// appears when it starts, a parallel group's children under it, a loop
// with its iterations as counts, an agent's step with the model turns and
// tool calls of its run (the child run the agent starts), and a
// downstream tool's progress notifications advance its step's bar.
//
// It draws in one of two ways ([Mode]). [Live] keeps one row per step on
// screen and redraws them in place, with github.com/vbauerster/mpb (made
// for many bars at once); it is for a terminal that can move its cursor.
// [Lines] writes one plain line per event and never moves the cursor: for
// a dumb terminal (TERM=dumb), a user who asked for plain output
// (NO_COLOR), or a log. [Detect] says which suits a writer.
//
// Logs written through [View.Writer] appear above the rows, so they never
// tear them. The view knows nothing of whoever runs the plans:
//
//	v := termview.New(os.Stderr, termview.Options{Mode: termview.Detect(os.Stderr, os.Getenv)})
//	app, err := server.New(ctx, cfg, server.Options{Hooks: v.Hooks(), Logger: slog.New(slog.NewTextHandler(v.Writer(), nil))})
//	...
//	env := app.Run(ctx, req, "cli")
//	v.Close() // the last frame stays on screen
package termview
