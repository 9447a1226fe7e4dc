// Package viewer serves a read-only web viewer of orchestra's execution
// records: the runs list (status, goal or first step, duration, steps,
// tokens, start; filtered by status, text and time, a page at a time,
// newest first), a run's page (a Gantt chart of its steps scaled to real
// time — parallel groups side by side, loop iterations, retries, agents'
// runs nested under their step with their model turns and tool calls,
// pauses as bands — where clicking a bar shows the step's resolved
// arguments, output, error, attempts and timing; the plan as written, the
// envelope, the pending calls of a paused run and the insights about its
// tools; a running run updates itself), and an insights page per tool.
//
// Everything is built from html/template, embedded files and a small
// hand-written script: no build step, nothing fetched from elsewhere, a
// Content-Security-Policy that allows only the viewer's own script and
// style sheet, every value escaped, and large bodies cut with a link to
// the whole.
//
// The viewer reads through [Records], which *store.Store implements, and
// shows a caller only what its [Identity]'s scope sees. With
// [Options.Authenticate] set, a caller presents a credential (a bearer
// token or an OAuth access token) in an Authorization header, or, in a
// browser, through the login form, which exchanges it for an HttpOnly,
// SameSite=Strict session cookie (Secure over TLS); the credential never
// appears in a URL. Without it, every caller sees every run, as the
// machine's own callers do: serve it on loopback only.
//
//	v, err := viewer.New(viewer.Options{Records: st, Authenticate: check})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/ui/", v)
package viewer
