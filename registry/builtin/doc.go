// Package builtin provides the tools orchestra offers without any downstream
// server, so that plans are useful offline: json_query (a jq program over
// JSON), render (text from a Go text/template) and http_request (HTTP calls to
// hosts the configuration allows).
//
// Constructors return registry.Tool values; nothing registers itself. A
// caller adds them to a catalog, with what the tools share with the
// program: the worker processes json_query and render evaluate in, and
// the addresses the program serves on, which http_request refuses:
//
//	cfg := builtin.DefaultConfig()
//	cfg.HTTP.AllowedHosts = []string{"api.github.com"}
//	var workers builtin.Workers
//	defer workers.Close()
//	cat := registry.NewCatalog(builtin.Tools(cfg, builtin.Options{Workers: &workers})...)
//
// A worker is a copy of the running program, started with a mark in its
// environment: the program calls ServeWorker first thing in main (its
// tests, in TestMain), which serves evaluations and exits in a worker and
// returns at once otherwise.
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
