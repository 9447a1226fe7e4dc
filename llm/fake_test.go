package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchestra-mcp/orchestra/llm"
)

// fakeAPI is a local HTTP server speaking a provider's wire format. Each
// request is answered by the next handler of replies (the last one repeats);
// the bodies and headers it received are recorded.
type fakeAPI struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	paths   []string
	arrived chan struct{}
}

type reply func(w http.ResponseWriter, r *http.Request)

func newFakeAPI(t *testing.T, replies ...reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{arrived: make(chan struct{}, 16)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("request body is not JSON: %v: %s", err, b)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		f.paths = append(f.paths, r.URL.Path)
		n := len(f.bodies)
		f.mu.Unlock()
		f.arrived <- struct{}{}
		replies[min(n, len(replies))-1](w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func (f *fakeAPI) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fakeAPI) header(i int) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[i]
}

// jsonReply answers with status and the JSON body, after setting headers
// given as key/value pairs.
func jsonReply(status int, body string, headers ...string) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// blockReply waits until the client gives up on the request.
func blockReply(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// env returns a Getenv that knows only vars.
func env(vars ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	return func(k string) string { return m[k] }
}

// get walks a decoded JSON value: keys for objects, ints for arrays.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

var planningTool = llm.ToolDef{
	Name:        "__planning__",
	Description: "Write the plan.",
	Strict:      true,
	Parameters: map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"type": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
		"required":             []any{"type", "content"},
		"additionalProperties": false,
	},
}

func checkError(t *testing.T, err error, kind error, status int, retryAfter time.Duration, contains ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error = %v, want %v", err, kind)
	}
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *llm.Error", err)
	}
	if e.StatusCode != status {
		t.Errorf("status = %d, want %d", e.StatusCode, status)
	}
	if e.RetryAfter != retryAfter {
		t.Errorf("RetryAfter = %v, want %v", e.RetryAfter, retryAfter)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// endlessReply answers with head, then piece over and over until the
// client stops reading, and sends how many bytes it wrote on sent. A
// model server that never ends its answer.
func endlessReply(contentType, head, piece string, sent chan<- int64) reply {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		n, _ := io.WriteString(w, head)
		total := int64(n)
		p := []byte(strings.Repeat(piece, max(1, 32<<10/len(piece))))
		for r.Context().Err() == nil {
			n, err := w.Write(p)
			total += int64(n)
			if err != nil {
				break
			}
		}
		sent <- total
	}
}

// checkReadThroughLimit calls m and checks that the endless answer of the
// server behind it fails with llm.ErrTooLarge after at most most bytes.
func checkReadThroughLimit(t *testing.T, srv *fakeAPI, call func() error, sent <-chan int64, most int64) {
	t.Helper()
	err := call()
	if n := srv.count(); n != 1 {
		t.Errorf("the model was asked %d times; an answer too large must not be asked for again", n)
	}
	if !errors.Is(err, llm.ErrTooLarge) || !errors.Is(err, llm.ErrBadResponse) {
		t.Fatalf("err = %v, want ErrTooLarge (a bad response)", err)
	}
	if !strings.Contains(err.Error(), "max_response_bytes") {
		t.Errorf("err = %v, want it to name max_response_bytes", err)
	}
	select {
	case n := <-sent:
		// The server writes ahead of what is read by what the kernel's
		// buffers hold; far less than an endless answer.
		if n > most {
			t.Errorf("the server wrote %d bytes before the client stopped reading; want at most %d", n, most)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server was still writing a minute after the call returned")
	}
}
