package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/toolcontext"
)

// TestSizeBound checks that the bound that spares counting a result never
// falls below the result's real size, and that it declines what it cannot
// bound, so that the response limit is enforced exactly as by counting.
func TestSizeBound(t *testing.T) {
	escapes := strings.Repeat("<>&\x01\"\\é\u2028", 40)
	quoted, _ := json.Marshal(escapes)
	decoded := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		res  *mcp.CallToolResult
		ok   bool
	}{
		{"empty", &mcp.CallToolResult{}, true},
		{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: step 11"}}}, true},
		{"escapes", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: escapes}}, IsError: true}, true},
		{"structured", &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: "{}"}},
			StructuredContent: decoded(`{"a":[1,-2.5e300,0.1,true,null,"` + strings.Repeat(`\u0001`, 9) + `"],"` + strings.Repeat(`\"`, 5) + `":{"x":{}}}`),
		}, true},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"}}}, false},
		{"meta", &mcp.CallToolResult{Meta: mcp.Meta{"io.modelcontextprotocol/serverInfo": decoded(`{"name":"fx","version":` + string(quoted) + `}`)}}, true},
		{"typed meta", &mcp.CallToolResult{Meta: mcp.Meta{"k": struct{ V string }{"v"}}}, false},
		{"input requests", &mcp.CallToolResult{RequestState: "s"}, false},
		{"annotated", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}}, false},
		{"typed structure", &mcp.CallToolResult{StructuredContent: struct{ A int }{1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bound, ok := sizeBound(tc.res)
			if ok != tc.ok {
				t.Fatalf("sizeBound ok = %v, want %v", ok, tc.ok)
			}
			if n := jsonSize(tc.res); ok && bound < n {
				t.Errorf("bound %d is below the real size %d", bound, n)
			}
			if ok && withinBound(tc.res, bound-1) {
				t.Errorf("withinBound(%d) with a bound of %d", bound-1, bound)
			}
		})
	}
}

// BenchmarkResultSize compares counting a small result (encoding it) with
// bounding it, the check every downstream result goes through:
//
//	go test -run '^$' -bench ResultSize ./registry/mcpserver/
func BenchmarkResultSize(b *testing.B) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: step 11"}}}
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = jsonSize(res)
		}
	})
	b.Run("bound", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = withinBound(res, 1<<20)
		}
	})
}

// BenchmarkDownstreamCall calls the fixture server's echo over stdio, with
// no reader of progress (the call carries no progress token) and with one
// (a token, a route to it, and a timer to forget the route):
//
//	go test -run '^$' -bench DownstreamCall ./registry/mcpserver/
func BenchmarkDownstreamCall(b *testing.B) {
	env := startManager(b, map[string]ServerConfig{"fx": {Command: fixtureBin}}, Options{})
	echo := env.tool(b, "fx__echo")
	for _, bc := range []struct {
		name     string
		progress func(registry.Progress)
	}{{"progress=none", nil}, {"progress=read", func(registry.Progress) {}}} {
		b.Run(bc.name, func(b *testing.B) {
			req := &registry.CallRequest{Arguments: map[string]any{"text": "step 11"}, Progress: bc.progress}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := echo.Invoke(b.Context(), req); err != nil || res.IsError {
					b.Fatalf("echo: %v %v", err, res)
				}
			}
		})
	}
}

// BenchmarkDownstreamCallIDs is BenchmarkDownstreamCall's echo with the
// request's and the step's ids in the context: sent in _meta (the
// default), and not (forward_ids: false):
//
//	go test -run '^$' -bench DownstreamCallIDs ./registry/mcpserver/
func BenchmarkDownstreamCallIDs(b *testing.B) {
	off := false
	env := startManager(b, map[string]ServerConfig{"fx": {Command: fixtureBin}, "quiet": {Command: fixtureBin, ForwardIDs: &off}}, Options{})
	ctx := toolcontext.WithCall(toolcontext.WithIDs(b.Context(), toolcontext.IDs{RequestID: "req-42", ContextID: "ctx-7", UserID: "alice", Tenant: "acme"}),
		toolcontext.Call{ExecID: "5f0e8c1e-2c55-4a59-9d3e-0d1c2f6a7b8c", StepID: "each[3]"})
	for _, bc := range []struct{ name, tool string }{{"ids=forwarded", "fx__echo"}, {"ids=off", "quiet__echo"}} {
		echo := env.tool(b, bc.tool)
		b.Run(bc.name, func(b *testing.B) {
			req := &registry.CallRequest{Arguments: map[string]any{"text": "step 11"}}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := echo.Invoke(ctx, req); err != nil || res.IsError {
					b.Fatalf("echo: %v %v", err, res)
				}
			}
		})
	}
}
