// Package worker runs CPU- and memory-bound evaluations in child processes
// that can be stopped for real: copies of the running executable, each with
// its own address-space limit, killed at their deadline.
//
// An evaluation in the server's own process cannot be bounded: one
// allocation can take gigabytes before any check runs, and a library loop
// that never looks at its context goes on burning CPU after its caller gave
// up. In a worker, the kernel refuses the allocation past the limit (the
// worker dies of it and the caller gets a [LimitError]), the worker stops
// itself when the evaluation has used its CPU time, and the caller's
// deadline kills it. The server only ever loses a worker, which the pool
// replaces.
//
// A program that uses workers enters the worker loop with its handlers
// first thing in main, and its tests do the same in TestMain, so that
// test binaries can be workers too; nothing happens because the package
// was imported:
//
//	func main() {
//		if worker.IsChild() {
//			worker.Serve(map[string]worker.Handler{"upper": func(p []byte) ([]byte, error) {
//				return bytes.ToUpper(p), nil
//			}})
//		}
//		...
//	}
//
// and calls them through a [Pool]:
//
//	p := worker.NewPool(worker.Options{Max: 4, MemoryBytes: 128 << 20})
//	defer p.Close()
//	out, err := p.Do(ctx, worker.Job{Handler: "upper", Payload: []byte("hi"), CPU: time.Second, MaxReply: 1 << 20})
//
// Workers start when first needed, serve one evaluation at a time, are
// reused, and exit after a minute without work. They get a minimal
// environment: nothing of the server's (no secrets) beyond what the Go
// runtime needs. Workers exist where the kernel enforces an address-space
// limit (RLIMIT_AS): [Supported] reports it (Linux); elsewhere callers
// evaluate in their own process.
package worker
