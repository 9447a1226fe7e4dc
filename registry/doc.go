// Package registry is orchestra's tool catalog: the one Tool type that every
// callable thing is (built-in tools, the tools of downstream MCP servers, and
// later agents), and a Catalog that holds them.
//
// A tool is a value. Constructors return tools; they never register
// themselves. The catalog knows nothing about any one tool:
//
//	cat := registry.NewCatalog()
//	err := cat.Add(registry.Tool{
//		Name:        "echo",
//		Description: "Returns its arguments.",
//		InputSchema: &jsonschema.Schema{Type: "object"},
//		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
//			return &registry.Result{Structured: req.Arguments}, nil
//		},
//	})
//	tool, ok := cat.Lookup("echo")
//
// Call never panics out to its caller: Invoke recovers a panicking tool into
// an error of type *PanicError.
package registry
