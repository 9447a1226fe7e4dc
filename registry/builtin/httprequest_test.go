package builtin

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchestra-mcp/orchestra/registry"
)

// newTestServer starts a loopback server with a few endpoints and counts
// the requests it receives.
func newTestServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		fmt.Fprint(w, `{"items": [{"name": "a", "n": 1}], "total": 1}`)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/vnd.test+json")
		json.NewEncoder(w).Encode(map[string]any{
			"method":       r.Method,
			"query":        r.URL.Query(),
			"content_type": r.Header.Get("Content-Type"),
			"x_token":      r.Header.Get("X-Token"),
			"user_agent":   r.Header.Get("User-Agent"),
			"body":         string(body),
		})
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "0123456789abcdefghij")
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0xff, 0xfe, 0x00, 0x01})
	})
	mux.HandleFunc("/notfound", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error": "no such thing"}`)
	})
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"unterminated`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestHTTPRequest(t *testing.T) {
	srv, _ := newTestServer(t)
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true}, testOpts)
	tests := []struct {
		name string
		args map[string]any
		want map[string]any // fields of the output to compare
	}{
		{
			name: "get json",
			args: map[string]any{"url": srv.URL + "/json"},
			want: map[string]any{
				"status":        200,
				"json":          map[string]any{"items": []any{map[string]any{"name": "a", "n": 1}}, "total": 1},
				"truncated":     false,
				"body_encoding": "utf-8",
				"url":           srv.URL + "/json",
			},
		},
		{
			name: "post json body with query and headers",
			args: map[string]any{
				"method":  "post",
				"url":     srv.URL + "/echo?a=1",
				"query":   map[string]any{"b": "two", "n": 3.0, "flag": true, "list": []any{"x", json.Number("2")}, "skip": nil},
				"headers": map[string]any{"X-Token": "secret"},
				"body":    map[string]any{"k": []any{1.0, "v"}},
			},
			want: map[string]any{
				"status": 200,
				"json": map[string]any{
					"method":       "POST",
					"query":        map[string]any{"a": []any{"1"}, "b": []any{"two"}, "n": []any{"3"}, "flag": []any{"true"}, "list": []any{"x", "2"}},
					"content_type": "application/json",
					"x_token":      "secret",
					"user_agent":   "orchestra-http_request/1",
					"body":         `{"k":[1,"v"]}`,
				},
			},
		},
		{
			name: "string body is sent as is",
			args: map[string]any{"method": "PUT", "url": srv.URL + "/echo", "body": "raw text", "headers": map[string]any{"Content-Type": "text/plain"}},
			want: map[string]any{"json": map[string]any{
				"method": "PUT", "query": map[string]any{}, "content_type": "text/plain", "x_token": "",
				"user_agent": "orchestra-http_request/1", "body": "raw text",
			}},
		},
		{
			name: "error status is a result",
			args: map[string]any{"method": "DELETE", "url": srv.URL + "/notfound"},
			want: map[string]any{"status": 404, "json": map[string]any{"error": "no such thing"}, "body": `{"error": "no such thing"}`},
		},
		{
			name: "text body",
			args: map[string]any{"url": srv.URL + "/text", "timeout_ms": json.Number("5000")},
			want: map[string]any{"status": 200, "body": "0123456789abcdefghij", "json": nil},
		},
		{
			name: "invalid json body leaves json null",
			args: map[string]any{"url": srv.URL + "/badjson"},
			want: map[string]any{"status": 200, "body": `{"unterminated`, "json": nil},
		},
		{
			name: "binary body is base64",
			args: map[string]any{"url": srv.URL + "/binary"},
			want: map[string]any{"body": "//4AAQ==", "body_encoding": "base64"},
		},
		{
			name: "head has no body",
			args: map[string]any{"method": "HEAD", "url": srv.URL + "/json"},
			want: map[string]any{"status": 200, "body": "", "json": nil},
		},
		{
			name: "redirect is followed",
			args: map[string]any{"url": srv.URL + "/redirect?to=/text"},
			want: map[string]any{"status": 200, "body": "0123456789abcdefghij", "url": srv.URL + "/text"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tool.Invoke(t.Context(), &registry.CallRequest{Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("tool error: %s", res.Text())
			}
			out := res.Output().(map[string]any)
			got := map[string]any{}
			for k := range tt.want {
				got[k] = out[k]
			}
			if diff := cmp.Diff(roundTrip(t, tt.want), roundTrip(t, got)); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if h, _ := out["headers"].(map[string]any); h["content-type"] == nil {
				t.Errorf("headers %v have no lower-case content-type", out["headers"])
			}
		})
	}
}

func TestHTTPRequestHeaders(t *testing.T) {
	srv, _ := newTestServer(t)
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true}, testOpts)
	res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/json"))
	if err != nil || res.IsError {
		t.Fatalf("got %v, %v", res.Text(), err)
	}
	h := res.Output().(map[string]any)["headers"].(map[string]any)
	if got, want := h["x-multi"], "a, b"; got != want {
		t.Errorf("x-multi = %v, want %q", got, want)
	}
	if got := h["content-type"]; got != "application/json; charset=utf-8" {
		t.Errorf("content-type = %v", got)
	}
}

func TestHTTPRequestBodyLimit(t *testing.T) {
	srv, _ := newTestServer(t)
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true, MaxResponseBytes: 10}, testOpts)
	for _, tt := range []struct {
		path      string
		body      string
		truncated bool
	}{
		{"/text", "0123456789", true},
		{"/json", `{"items": `, true}, // truncated JSON is not parsed
		{"/binary", "//4AAQ==", false},
	} {
		t.Run(tt.path, func(t *testing.T) {
			res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+tt.path))
			if err != nil || res.IsError {
				t.Fatalf("got %v, %v", res.Text(), err)
			}
			out := res.Output().(map[string]any)
			if out["body"] != tt.body || out["truncated"] != tt.truncated || out["json"] != nil {
				t.Errorf("got body %q truncated %v json %v, want body %q truncated %v json null", out["body"], out["truncated"], out["json"], tt.body, tt.truncated)
			}
		})
	}
}

// TestHTTPRequestGzipBomb: a small compressed answer that inflates to
// gigabytes is read no further than the limit, and its zeros are sent as
// base64, not as JSON escapes six times their size.
func TestHTTPRequestGzipBomb(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/plain")
		zw := gzip.NewWriter(w)
		zeros := make([]byte, 1<<20)
		for range 1024 { // 1 GiB inflated
			if _, err := zw.Write(zeros); err != nil {
				return
			}
		}
		zw.Close()
	}))
	defer srv.Close()
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true, MaxResponseBytes: 1 << 20}, testOpts)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL))
	runtime.ReadMemStats(&after)
	if err != nil || res.IsError {
		t.Fatalf("got %v, %v", res.Text(), err)
	}
	out := res.Output().(map[string]any)
	if out["truncated"] != true || out["body_encoding"] != "base64" || len(out["body"].(string)) > 1400000 {
		t.Errorf("got truncated %v, encoding %v, %d bytes of body", out["truncated"], out["body_encoding"], len(out["body"].(string)))
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 32<<20 {
		t.Errorf("a 1 MiB limit cost %d MiB", grown>>20)
	}
}

func TestHTTPRequestTruncatedUTF8(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "aé") // 'é' is two bytes: a 2-byte cap cuts it in half
	}))
	defer srv.Close()
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true, MaxResponseBytes: 2}, testOpts)
	res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL))
	if err != nil || res.IsError {
		t.Fatalf("got %v, %v", res.Text(), err)
	}
	out := res.Output().(map[string]any)
	if out["body"] != "a" || out["body_encoding"] != "utf-8" || out["truncated"] != true {
		t.Errorf("got %v", out)
	}
}

func TestHTTPRequestRedirects(t *testing.T) {
	srv, _ := newTestServer(t)
	t.Run("limit", func(t *testing.T) {
		tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true, MaxRedirects: 2}, testOpts)
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/loop"))
		wantToolError(t, res, err, "stopped after 2 redirects", "http_request.max_redirects")
	})
	t.Run("not followed", func(t *testing.T) {
		tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true, MaxRedirects: -1}, testOpts)
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/loop"))
		if err != nil || res.IsError {
			t.Fatalf("got %v, %v", res.Text(), err)
		}
		out := res.Output().(map[string]any)
		if out["status"] != http.StatusFound || out["headers"].(map[string]any)["location"] != "/loop" {
			t.Errorf("got %v, want the 302 response", out)
		}
	})
	t.Run("to a host not allowed", func(t *testing.T) {
		tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true}, testOpts)
		to := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/text"
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/redirect?to="+url.QueryEscape(to)))
		wantToolError(t, res, err, "redirected to a host that is not allowed", `"localhost"`, "http_request.allowed_hosts")
	})
	t.Run("to another scheme", func(t *testing.T) {
		tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true}, testOpts)
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/redirect?to="+url.QueryEscape("ftp://127.0.0.1/x")))
		wantToolError(t, res, err, "only http and https")
	})
}

// TestHTTPRequestPrivateNetworks checks that with private networks off no
// request reaches a loopback address, however it is addressed.
func TestHTTPRequestPrivateNetworks(t *testing.T) {
	srv, hits := newTestServer(t)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"*"}}, testOpts)
	for _, u := range []string{
		srv.URL + "/json",
		"http://localhost:" + port + "/json",
		"http://[::1]:" + port + "/json",
		"http://[::ffff:127.0.0.1]:" + port + "/json",
		"http://0.0.0.0:" + port + "/json",
	} {
		t.Run(u, func(t *testing.T) {
			res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, u))
			wantToolError(t, res, err, "refusing to connect to", "http_request.allow_private_networks")
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server received %d requests, want 0", n)
	}
}

// TestHTTPRequestRedirectToPrivate stands one loopback server in for a
// public host and checks that its redirect to another loopback address is
// refused at dial time.
func TestHTTPRequestRedirectToPrivate(t *testing.T) {
	public, publicHits := newTestServer(t)
	private, privateHits := newTestServer(t)
	publicAddr := netip.MustParseAddrPort(strings.TrimPrefix(public.URL, "http://"))
	tool := httpRequestTool(HTTPConfig{AllowedHosts: []string{"127.0.0.1", "localhost"}}, testOpts,
		func(ap netip.AddrPort) bool { return ap == publicAddr })

	// The stand-in is reachable.
	res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, public.URL+"/text"))
	if err != nil || res.IsError {
		t.Fatalf("got %v, %v", res.Text(), err)
	}
	privatePort := private.URL[strings.LastIndexByte(private.URL, ':')+1:]
	for _, to := range []string{private.URL + "/text", "http://localhost:" + privatePort + "/text"} {
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, public.URL+"/redirect?to="+url.QueryEscape(to)))
		wantToolError(t, res, err, "refusing to connect to", "loopback address")
	}
	if n := privateHits.Load(); n != 0 {
		t.Errorf("the private server received %d requests, want 0", n)
	}
	if n := publicHits.Load(); n != 3 {
		t.Errorf("the public server received %d requests, want 3", n)
	}
}

func TestHTTPRequestTransportErrors(t *testing.T) {
	srv, _ := newTestServer(t)
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1"}, AllowPrivateNetworks: true}, testOpts)

	t.Run("timeout", func(t *testing.T) {
		_, err := call(t, tool, fmt.Sprintf(`{"url": %q, "timeout_ms": 50}`, srv.URL+"/hang"))
		if err == nil || !registry.IsTransient(err) {
			t.Fatalf("got %v, want a transient error", err)
		}
		if !strings.Contains(err.Error(), "no complete response within 50ms") {
			t.Errorf("error %q does not name the timeout", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		closed := httptest.NewServer(http.NotFoundHandler())
		closed.Close()
		_, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, closed.URL))
		if err == nil || !registry.IsTransient(err) {
			t.Fatalf("got %v, want a transient error", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := contextWithCancel(t)
		cancel()
		_, err := tool.Invoke(ctx, &registry.CallRequest{Arguments: map[string]any{"url": srv.URL + "/json"}})
		if err == nil || registry.IsTransient(err) {
			t.Fatalf("got %v, want a non-transient error", err)
		}
	})
}

func TestHTTPRequestArgumentErrors(t *testing.T) {
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"api.example.com", "*.example.org"}}, testOpts)
	tests := []struct {
		name      string
		args      string
		fragments []string
	}{
		{"missing url", `{}`, []string{`"url" is required`}},
		{"url not a string", `{"url": 1}`, []string{`"url" must be a string`}},
		{"relative url", `{"url": "/items"}`, []string{"must be absolute"}},
		{"other scheme", `{"url": "file:///etc/passwd"}`, []string{"http:// or https://"}},
		{"no host", `{"url": "http://"}`, []string{"has no host"}},
		{"host not allowed", `{"url": "https://evil.com/x"}`, []string{`host "evil.com" is not allowed`, "api.example.com, *.example.org", "http_request.allowed_hosts"}},
		{"apex of wildcard", `{"url": "https://example.org/x"}`, []string{`host "example.org" is not allowed`}},
		{"bad method", `{"method": "TRACE", "url": "https://api.example.com"}`, []string{`method "TRACE" is not supported`, "GET, POST"}},
		{"unknown argument", `{"url": "https://api.example.com", "data": 1}`, []string{`unknown argument "data"`}},
		{"header not a string", `{"url": "https://api.example.com", "headers": {"X-N": 1}}`, []string{`header "X-N" must be a string`}},
		{"bad header name", `{"url": "https://api.example.com", "headers": {"X N": "1"}}`, []string{"not a valid header name"}},
		{"header injection", `{"url": "https://api.example.com", "headers": {"X-N": "a\r\nB: c"}}`, []string{"line break"}},
		{"host header", `{"url": "https://api.example.com", "headers": {"Host": "evil.com"}}`, []string{"Host header cannot be set"}},
		{"query object", `{"url": "https://api.example.com", "query": {"q": {"a": 1}}}`, []string{`query parameter "q"`}},
		{"query nested array", `{"url": "https://api.example.com", "query": {"q": [[1]]}}`, []string{`query parameter "q"`}},
		{"zero timeout", `{"url": "https://api.example.com", "timeout_ms": 0}`, []string{"timeout_ms must be a positive"}},
		{"fractional timeout", `{"url": "https://api.example.com", "timeout_ms": 1.5}`, []string{`"timeout_ms" must be an integer`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := call(t, tool, tt.args)
			wantToolError(t, res, err, tt.fragments...)
		})
	}
}

func TestHostMatcher(t *testing.T) {
	m := newHostMatcher([]string{"API.example.com", "*.Example.org", "https://full.example.net:8443/path", "[::1]", " ", "10.0.0.1"})
	tests := []struct {
		host string
		want bool
	}{
		{"api.example.com", true},
		{"API.EXAMPLE.COM", true},
		{"api.example.com.", true},
		{"example.com", false},
		{"x.api.example.com", false},
		{"a.example.org", true},
		{"a.b.example.org", true},
		{"example.org", false},
		{"badexample.org", false},
		{"full.example.net", true},
		{"::1", true},
		{"10.0.0.1", true},
		{"10.0.0.2", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := m.allows(tt.host); got != tt.want {
			t.Errorf("allows(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
	if !newHostMatcher([]string{"*"}).allows("anything.at.all") {
		t.Error(`"*" does not allow every host`)
	}
	if newHostMatcher(nil).allows("example.com") {
		t.Error("an empty list allows a host")
	}
}

func TestHTTPRequestDescription(t *testing.T) {
	desc := HTTPRequest(HTTPConfig{AllowedHosts: []string{"api.example.com"}}, testOpts).Description
	for _, want := range []string{"NOT tool failures", "api.example.com", "non-public addresses are refused", "at most 5 redirects", "30s", "4 MiB"} {
		if !strings.Contains(desc, want) {
			t.Errorf("description does not mention %q:\n%s", want, desc)
		}
	}
}
