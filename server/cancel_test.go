package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/config"
	"github.com/orchestra-mcp/orchestra/registry"
	"github.com/orchestra-mcp/orchestra/server"
	"github.com/orchestra-mcp/orchestra/store"
)

// stopper is a tool that blocks until its context ends and reports that
// it saw the end: the downstream call was cancelled.
type stopper struct {
	started chan struct{}
	stopped chan struct{}
}

func newStopper() *stopper {
	return &stopper{started: make(chan struct{}, 1), stopped: make(chan struct{}, 1)}
}

func (s *stopper) tool(t testing.TB) registry.Tool {
	return registry.Tool{
		Name:        "wait",
		Description: "Waits until it is cancelled. A test tool.",
		Source:      "test",
		InputSchema: mustSchema(t, `{"type":"object"}`),
		Call: func(ctx context.Context, req *registry.CallRequest) (*registry.Result, error) {
			s.started <- struct{}{}
			<-ctx.Done()
			s.stopped <- struct{}{}
			return nil, ctx.Err()
		},
	}
}

// await fails the test when c gets no value in time.
func await(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

const waitCall = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"agent_orchestrate","arguments":{"plan":{"steps":[{"id":"w","tool":"wait","arguments":{}}]}}%s}}`

const cancelNote = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the user gave up"}}`

// modernMeta is the _meta a 2026-07-28 request carries.
const modernMeta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// checkCancelledRecord checks that the app's one run is recorded as not
// successful, with its step cancelled.
func checkCancelledRecord(t *testing.T, app *server.App) {
	t.Helper()
	st := app.Store()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := st.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		runs, _, err := st.List(t.Context(), store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 1 && runs[0].Status != store.StatusRunning {
			if runs[0].Status == store.StatusSuccess {
				t.Fatalf("the cancelled run is recorded as %s", runs[0].Status)
			}
			_, steps, err := st.Get(t.Context(), runs[0].ExecID)
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) != 1 || steps[0].Status != "cancelled" {
				t.Fatalf("step records %+v; want the one step cancelled", steps)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs = %+v; want one finished run", runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitApp(t *testing.T, s *stopper) *server.App {
	return newApp(t, config.Default(), s.tool(t))
}

// TestStdioCancelledCallGetsNoResponse cancels a running plan over stdio
// with notifications/cancelled: the plan stops, its record is not a
// success, and no response is written for the request.
func TestStdioCancelledCallGetsNoResponse(t *testing.T) {
	s := newStopper()
	app := waitApp(t, s)
	r := newRawStdioApp(t, app)
	r.send(strings.Replace(waitCall, "%s", "", 1))
	await(t, s.started, "the step to start")
	r.send(cancelNote)
	await(t, s.stopped, "the step to be cancelled")
	r.send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`)
	r.in.Close() // the server answers what it read, then ends
	for r.out.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(r.out.Bytes(), &m)
		if string(m.ID) == "5" {
			t.Errorf("a response was written for the cancelled request: %s", r.out.Text())
		}
	}
	checkCancelledRecord(t, app)
}

// TestHTTPCancel cancels a running plan over stateful and stateless
// Streamable HTTP on both protocol eras, the two ways clients do: with
// notifications/cancelled, reading on until the call's stream ends (which
// it must without a response), and by dropping the request. Either way the
// plan stops and is recorded as cancelled.
func TestHTTPCancel(t *testing.T) {
	for _, mode := range []struct {
		stateless bool
		version   string
	}{{false, v20251125}, {true, v20251125}, {false, v20260728}, {true, v20260728}} {
		for _, how := range []string{"notification", "drop"} {
			name := map[bool]string{false: "stateful", true: "stateless"}[mode.stateless] + "/" + mode.version + "/" + how
			t.Run(name, func(t *testing.T) {
				s := newStopper()
				app := waitApp(t, s)
				srv := httptest.NewServer(app.HTTPHandler(server.HTTPOptions{Stateless: mode.stateless}))
				t.Cleanup(srv.Close)
				c := newRawHTTPClient(t, srv.URL+"/mcp", mode.version)
				meta := ""
				if mode.version == v20260728 {
					meta = modernMeta
				}
				ctx, drop := context.WithCancel(t.Context())
				defer drop()
				// The response's headers come with its first event: open
				// the call on another goroutine.
				opened := c.openAsync(ctx, strings.Replace(waitCall, "%s", meta, 1))
				await(t, s.started, "the step to start")
				if how == "drop" {
					drop()
					if resp := <-opened; resp != nil {
						resp.Body.Close()
					}
					await(t, s.stopped, "the step to be cancelled")
					checkCancelledRecord(t, app)
					return
				}
				cresp := c.open(t.Context(), cancelNote)
				io.Copy(io.Discard, cresp.Body)
				cresp.Body.Close()
				await(t, s.stopped, "the step to be cancelled")
				resp := <-opened
				if resp == nil {
					t.Fatal("the call failed")
				}
				body, _ := io.ReadAll(resp.Body) // the stream ends
				resp.Body.Close()
				for line := range strings.SplitSeq(string(body), "\n") {
					if strings.Contains(line, `"id":5`) {
						t.Errorf("a response was written for the cancelled request: %s", line)
					}
				}
				checkCancelledRecord(t, app)
			})
		}
	}
}

// rawHTTPClient speaks Streamable HTTP by hand: initialize on a legacy
// protocol (keeping the session, if the server gives one), headers only on
// 2026-07-28.
type rawHTTPClient struct {
	t       *testing.T
	url     string
	version string
	session string
}

func newRawHTTPClient(t *testing.T, url, version string) *rawHTTPClient {
	c := &rawHTTPClient{t: t, url: url, version: version}
	if version == v20260728 {
		return c
	}
	resp := c.open(t.Context(), initializeBody)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.session = resp.Header.Get("Mcp-Session-Id")
	resp = c.open(t.Context(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c
}

// openAsync posts body on another goroutine and delivers the response, or
// nil when the request failed.
func (c *rawHTTPClient) openAsync(ctx context.Context, body string) <-chan *http.Response {
	opened := make(chan *http.Response, 1)
	go func() {
		req := c.request(ctx, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			opened <- nil
			return
		}
		opened <- resp
	}()
	return opened
}

func (c *rawHTTPClient) request(ctx context.Context, body string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", c.version)
	if c.version >= v20260728 {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.Name != "" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	return req
}

// open posts body and returns the response with its body unread.
func (c *rawHTTPClient) open(ctx context.Context, body string) *http.Response {
	c.t.Helper()
	resp, err := http.DefaultClient.Do(c.request(ctx, body))
	if err != nil {
		c.t.Fatalf("POST %s: %v", body, err)
	}
	if resp.StatusCode >= 300 {
		data, _ := io.ReadAll(bufio.NewReader(resp.Body))
		c.t.Fatalf("POST %s: status %d: %s", body, resp.StatusCode, data)
	}
	return resp
}
