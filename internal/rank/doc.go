// Package rank ranks short documents against a query with BM25, the
// lexical ranking of search engines: the planner uses it to offer a model
// the tools that fit a goal out of a large catalog, and orchestra_tools to
// answer a query.
//
//	ix := rank.New([]string{"read_file: Read a file", "send_email: Send an email"})
//	best := ix.Top("read the notes file", 1) // [0]
package rank
