// Command fixtureserver is a downstream MCP server for orchestra's tests.
//
// It serves over stdio by default, or over Streamable HTTP with -http ADDR,
// in which case it prints "listening on http://HOST:PORT" as its first line
// of standard output once it accepts connections. Its tools cover the cases a
// client of downstream servers must handle: structured output, slow calls
// (and calls that wait until a test lets them end),
// tool errors, a crash mid-call, progress, text-only and malformed results,
// large results, stray output on stdout, its environment, and tools
// added after start (tools/list_changed).
//
// With -fail-start it exits at once with status 2, like a server that cannot
// start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// httpMode is the -http flag: the address served, or "" for stdio.
var httpMode *string

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fixtureserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpMode = fs.String("http", "", "serve Streamable HTTP on `addr` instead of stdio")
	failStart := fs.Bool("fail-start", false, "exit with status 2 at once")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *failStart {
		fmt.Fprintln(stderr, "fixtureserver: failing at start as asked")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *httpMode == "" {
		fmt.Fprintln(stderr, "fixtureserver: serving on stdio")
		if err := newServer(stderr).Run(ctx, &mcp.StdioTransport{}); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(stderr, "fixtureserver:", err)
			return 1
		}
		return 0
	}

	ln, err := net.Listen("tcp", *httpMode)
	if err != nil {
		fmt.Fprintln(stderr, "fixtureserver:", err)
		return 1
	}
	srv := newServer(stderr)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Handler: h}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "fixtureserver:", err)
		return 1
	}
	return 0
}

type (
	echoIn struct {
		Text string `json:"text"`
	}
	echoOut struct {
		Text string `json:"text"`
	}

	addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	addOut struct {
		Sum float64 `json:"sum"`
	}

	lookupIn struct {
		ID string `json:"id"`
	}
	lookupOut struct {
		ID    string `json:"id"`
		User  user   `json:"user"`
		Items []item `json:"items"`
	}
	user struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	item struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}

	sleepIn struct {
		MS int `json:"ms" jsonschema:"how long to sleep, in milliseconds"`
	}
	sleepOut struct {
		SleptMS int `json:"slept_ms"`
	}

	gateIn struct {
		Path string `json:"path" jsonschema:"the file whose creation opens the gate"`
	}
	gateOut struct {
		Opened bool `json:"opened"`
	}

	failIn struct {
		Message string `json:"message,omitempty"`
	}

	progressIn struct {
		N int `json:"n"`
	}
	progressOut struct {
		Count int `json:"count"`
	}

	bigIn struct {
		Bytes int `json:"bytes"`
	}

	metaOut struct {
		Meta map[string]any `json:"meta"`
	}

	addToolIn struct {
		Name string `json:"name"`
	}
	addToolOut struct {
		Added string `json:"added"`
	}

	noArgs struct{}

	envOut struct {
		Env []string `json:"env"`
	}

	strayIn struct {
		Lines int    `json:"lines"`
		Text  string `json:"text"`
	}
)

// rawStdout is where the stdio transport writes; the stray tool writes
// there too, as a misbehaving server would.
var rawStdout io.Writer = os.Stdout

func newServer(stderr io.Writer) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fixtureserver", Version: "1.0.0"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})

	addTally(s)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns its text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut(in), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds a and b."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Returns a nested record."},
		func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, lookupOut, error) {
			return nil, lookupOut{
				ID:    in.ID,
				User:  user{Name: "Ada", Tags: []string{"admin", "ops"}},
				Items: []item{{SKU: "a-1", Qty: 2}, {SKU: "b-2", Qty: 5}},
			}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleeps ms milliseconds; stops early when cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, in sleepIn) (*mcp.CallToolResult, sleepOut, error) {
			fmt.Fprintln(stderr, "sleep started")
			t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return nil, sleepOut{SleptMS: in.MS}, nil
			case <-ctx.Done():
				fmt.Fprintln(stderr, "sleep cancelled")
				return nil, sleepOut{}, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "gate", Description: "Waits until the file at path exists (a test creates it when it has seen what it waits for), reporting progress 1 of 2 as it starts to wait when the caller asked for progress; stops early when cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, in gateIn) (*mcp.CallToolResult, gateOut, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "waiting for the gate"})
				if err != nil {
					return nil, gateOut{}, err
				}
			}
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, err := os.Stat(in.Path); err == nil {
					return nil, gateOut{Opened: true}, nil
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					return nil, gateOut{}, ctx.Err()
				}
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails with a tool error."},
		func(ctx context.Context, req *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, any, error) {
			msg := in.Message
			if msg == "" {
				msg = "it failed"
			}
			return nil, nil, fmt.Errorf("fixture failure: %s", msg)
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the server process mid-call."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noArgs) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(stderr, "crashing as asked")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Reports n progress steps, then returns."},
		func(ctx context.Context, req *mcp.CallToolRequest, in progressIn) (*mcp.CallToolResult, progressOut, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= in.N && tok != nil; i++ {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i), Total: float64(in.N), Message: fmt.Sprintf("step %d", i),
				})
				if err != nil {
					return nil, progressOut{}, err
				}
			}
			return nil, progressOut{Count: in.N}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "meta", Description: "Returns the _meta of its request."},
		func(ctx context.Context, req *mcp.CallToolRequest, in noArgs) (*mcp.CallToolResult, metaOut, error) {
			return nil, metaOut{Meta: req.Params.Meta}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Returns a text block of the given size."},
		func(ctx context.Context, req *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns the names and values of its environment variables."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, envOut, error) {
			return nil, envOut{Env: os.Environ()}, nil
		})

	mcp.AddTool(s, &mcp.Tool{Name: "stray", Description: "Over stdio, writes lines of text straight to stdout (a stray print, or raw JSON-RPC such as a flood of notifications), then returns."},
		func(ctx context.Context, req *mcp.CallToolRequest, in strayIn) (*mcp.CallToolResult, any, error) {
			if *httpMode == "" {
				line := []byte(in.Text + "\n")
				for range in.Lines {
					if _, err := rawStdout.Write(line); err != nil {
						return nil, nil, err
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "wrote"}}}, nil, nil
		})

	s.AddTool(&mcp.Tool{
		Name:        "text_only",
		Description: "Returns text content and no structured output.",
		InputSchema: &jsonschema.Schema{Type: "object"},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "just text"}}}, nil
	})

	// garbage declares {"count": integer} but returns a string there: a
	// result that violates its own outputSchema, which clients should catch.
	s.AddTool(&mcp.Tool{
		Name:        "garbage",
		Description: "Returns structured content that violates its own output schema.",
		InputSchema: &jsonschema.Schema{Type: "object"},
		OutputSchema: &jsonschema.Schema{
			Type:       "object",
			Properties: map[string]*jsonschema.Schema{"count": {Type: "integer"}},
			Required:   []string{"count"},
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			StructuredContent: map[string]any{"count": "not a number"},
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"count":"not a number"}`}},
		}, nil
	})

	// odd_schema has the kind of input schema some real servers send.
	s.AddTool(&mcp.Tool{
		Name:        "odd_schema",
		Description: "Has a loosely written input schema.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name":  map[string]any{"type": "str", "required": true},
				"count": map[string]any{"type": "int"},
				"opts":  map[string]any{"type": "dict"},
			},
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})

	// broken_schema's input schema refers to a definition it lacks: no
	// validator can use it, but the tool still works.
	s.AddTool(&mcp.Tool{
		Name:        "broken_schema",
		Description: "Has an input schema that does not resolve.",
		InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"x": map[string]any{"$ref": "#/definitions/missing"}},
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "called anyway"}}}, nil
	})

	// one_of's input schema is valid JSON Schema and valid MCP, in a shape
	// the model APIs refuse: a top-level oneOf whose branches declare
	// properties, an array without items, a bare true sub-schema.
	s.AddTool(&mcp.Tool{
		Name:        "one_of",
		Description: "Takes either a or b, and ids.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"ids": map[string]any{"type": "array"},
				"any": true,
				"a":   map[string]any{"type": "string", "description": "the top's own a"},
			},
			"oneOf": []any{
				map[string]any{"properties": map[string]any{"a": map[string]any{}}, "required": []any{"a"}},
				map[string]any{"properties": map[string]any{"b": map[string]any{"type": "integer"}}, "required": []any{"b"}},
			},
		},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})

	// "dotted.name" is a valid MCP tool name that model APIs reject.
	s.AddTool(&mcp.Tool{
		Name:        "dotted.name",
		Description: "Has a name that cannot be a catalog name.",
		InputSchema: &jsonschema.Schema{Type: "object"},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "unreachable"}}}, nil
	})

	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Adds a tool named name (an echo) to this server."},
		func(ctx context.Context, req *mcp.CallToolRequest, in addToolIn) (*mcp.CallToolResult, addToolOut, error) {
			if in.Name == "" {
				return nil, addToolOut{}, errors.New("name is required")
			}
			mcp.AddTool(s, &mcp.Tool{Name: in.Name, Description: "An echo added at run time."},
				func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
					return nil, echoOut(in), nil
				})
			return nil, addToolOut{Added: in.Name}, nil
		})
	return s
}
