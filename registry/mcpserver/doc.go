// Package mcpserver connects orchestra to downstream MCP servers, the ones
// users already run, as a client, and keeps their tools in a
// registry.Catalog so that plans can call them.
//
// Servers are configured like Claude Desktop's mcpServers entries (see
// ServerConfig): stdio servers run as child processes, Streamable HTTP
// servers are reached at a URL. A Manager starts them all concurrently, puts
// their tools in the catalog as <server>__<tool> with the server as Source,
// follows tools/list_changed, takes the tools out when a server dies and
// restarts it in the background with exponential backoff:
//
//	cat := registry.NewCatalog()
//	m := mcpserver.NewManager(map[string]mcpserver.ServerConfig{
//		"memory": {Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}},
//		"search": {URL: "http://127.0.0.1:9000/mcp", Headers: map[string]string{"Authorization": "Bearer ..."}},
//	}, cat, mcpserver.Options{Logger: logger})
//	m.Start(ctx) // returns once every server has started or failed once
//	defer m.Close()
//	for _, st := range m.Status() {
//		fmt.Println(st.Name, st.State, len(st.Tools), st.Error)
//	}
//	tool, _ := cat.Lookup("memory__read_graph")
//	res, err := tool.Invoke(ctx, &registry.CallRequest{})
//
// Downstream schemas are normalized once, when a tool is loaded (see
// NormalizeSchema), so that plan-time validation works on all of them; a tool
// whose schema cannot be used stays callable with a permissive input schema
// and says why in registry.Tool.SchemaProblem.
//
// A call passes the caller's cancellation and deadline to the server (a
// cancelled call sends notifications/cancelled), carries the orchestration
// depth and W3C traceparent in the request _meta (toolcontext.MetaDepth,
// toolcontext.MetaTraceparent) and, unless the server's forward_ids is
// false, the ids of the request and the step that make it
// (toolcontext.MetaIDs: request, context, user, tenant, exec and step ids
// under "io.github.orchestra-mcp/"), and relays progress to
// registry.CallRequest.Progress. Reports that the server sent just before its
// result may reach Progress shortly after the call returned. A call whose
// server is down or dies fails with an error wrapping
// registry.ErrServerUnavailable, marked registry.Transient; structured
// results that violate the tool's outputSchema, and results larger than
// Options.MaxResponseBytes, fail the call.
//
// Child processes never outlive the manager: each runs in its own process
// group, which Close kills, and on Linux the kernel kills it if orchestra
// dies. Their stderr goes to the logger line by line, with the attribute
// server=<name>. HTTP header values are never logged.
package mcpserver
