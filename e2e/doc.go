// Package e2e tests orchestra from outside, as its users meet it: the
// binary, built once, run as a subprocess by MCP clients of every kind
// (the TypeScript SDK, the Go SDK, mark3labs/mcp-go, the MCP Inspector)
// over stdio and Streamable HTTP, killed and signalled mid-run; and the
// README, whose generated sections and commands are checked against the
// code. The tests run from the module's root.
//
//	go test ./e2e
//	go test ./e2e -run TestReadmeGenerated -update-readme
package e2e
