// Package builtin provides the tools orchestra offers without any downstream
// server, so that plans are useful offline: json_query (a jq program over
// JSON), render (text from a Go text/template) and http_request (HTTP calls to
// hosts the configuration allows).
//
// Constructors return registry.Tool values; nothing registers itself. A
// caller adds them to a catalog:
//
//	cfg := builtin.DefaultConfig()
//	cfg.HTTP.AllowedHosts = []string{"api.github.com"}
//	cat := registry.NewCatalog(builtin.Tools(cfg)...)
//
// Tools reshape one step's output into the next step's arguments. In a plan:
//
//	{"id": "names", "tool": "json_query",
//	 "arguments": {"query": "[.items[].name]", "input": "$search.output.json"}}
//	{"tool": "render",
//	 "arguments": {"template": "Found {{len .names}}: {{join \", \" .names}}",
//	               "values": {"names": "$names.output.result"}}}
//
// Every tool is bounded: jq programs run under a deadline with capped results
// and output, templates stop at an output cap, and http_request refuses hosts
// outside its allow list and (by default) private network addresses, checked
// at dial time so that DNS names and redirects cannot reach them either.
package builtin
