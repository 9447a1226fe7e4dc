package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type (
	tallyIn struct {
		File string `json:"file" jsonschema:"the file that counts the calls"`
		Name string `json:"name" jsonschema:"what is counted"`
	}
	tallyOut struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
)

// addTally adds tally, which appends name to a file and returns how many
// times name is in it: the calls it counts outlive this process and
// orchestra's, so a test can tell whether a step ran twice across a
// restart.
func addTally(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "tally", Description: "Counts a call of name in file; returns the count so far."},
		func(ctx context.Context, req *mcp.CallToolRequest, in tallyIn) (*mcp.CallToolResult, tallyOut, error) {
			f, err := os.OpenFile(in.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, tallyOut{}, err
			}
			_, werr := fmt.Fprintln(f, in.Name)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return nil, tallyOut{}, werr
			}
			data, err := os.ReadFile(in.File)
			if err != nil {
				return nil, tallyOut{}, err
			}
			n := 0
			for _, line := range strings.Split(string(data), "\n") {
				if line == in.Name {
					n++
				}
			}
			return nil, tallyOut{Name: in.Name, Count: n}, nil
		})
}
