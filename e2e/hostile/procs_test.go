package hostile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// addressSpace is the limit every orchestra process of the matrix runs
// under (prlimit --as): a hostile input that took more would kill it, and
// the matrix would see the process gone.
const addressSpace = 4 << 30

// startTimeout bounds a server's start (its downstream server's too): it
// only bounds a hang, on a machine that may be loaded.
const startTimeout = 3 * time.Minute

// limited returns the command that runs name with args under the
// address-space limit.
func limited(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "prlimit", append([]string{fmt.Sprintf("--as=%d", addressSpace), name}, args...)...)
}

// served is an orchestra serve process.
type served struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan struct{}
	err    error
}

func (s *served) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// peakRSS returns the process's peak resident memory (VmHWM).
func (s *served) peakRSS() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func (s *served) stop() {
	if s.alive() {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// tailBuffer keeps the last bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 64<<10 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-32<<10:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// start runs cmd with its stderr kept.
func start(cmd *exec.Cmd, env []string) (*served, error) {
	s := &served{cmd: cmd, stderr: &tailBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// stdioClient speaks newline-delimited JSON-RPC to an orchestra serve
// process over its stdin and stdout. Cases are sent one at a time: a
// response without an id (a line whose id could not be read back) is the
// latest request's.
type stdioClient struct {
	*served
	in io.WriteCloser

	wmu     sync.Mutex // one message written at a time
	mu      sync.Mutex
	id      int
	pending map[string]chan json.RawMessage
}

func startStdio(ctx context.Context, orchestra, cfg string, env []string) (*stdioClient, error) {
	cmd := limited(ctx, orchestra, "serve", "--config", cfg, "--store", "memory")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s, err := start(cmd, env)
	if err != nil {
		return nil, err
	}
	c := &stdioClient{served: s, in: in, pending: map[string]chan json.RawMessage{}}
	go c.read(bufio.NewReaderSize(out, 1<<20))
	if _, err := c.roundTrip(func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}`, id)
	}, startTimeout); err != nil {
		return nil, fmt.Errorf("initializing the stdio server: %w\n%s", err, s.stderr)
	}
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return c, nil
}

// read hands each response to the request it answers.
func (c *stdioClient) read(out *bufio.Reader) {
	for {
		line, err := out.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) != nil || m.Method != "" {
			continue // a notification
		}
		id := string(m.ID)
		c.mu.Lock()
		if id == "null" || id == "" {
			id = strconv.Itoa(c.id)
		}
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- line
		}
	}
}

// nextID returns a fresh request id and the channel of its response.
func (c *stdioClient) nextID() (int, chan json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id++
	ch := make(chan json.RawMessage, 1)
	c.pending[strconv.Itoa(c.id)] = ch
	return c.id, ch
}

// roundTrip writes the message line(id) makes and waits for its response.
func (c *stdioClient) roundTrip(line func(id int) string, timeout time.Duration) (json.RawMessage, error) {
	id, ch := c.nextID()
	return c.send(strings.NewReader(line(id)+"\n"), ch, timeout)
}

// send writes what r holds and waits for the response on ch.
func (c *stdioClient) send(r io.Reader, ch chan json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	go func() {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		io.Copy(c.in, r)
	}()
	select {
	case msg := <-ch:
		return msg, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no answer within %s", timeout)
	case <-c.done:
		return nil, fmt.Errorf("the server exited: %v", c.err)
	}
}

// httpServer is an orchestra serve --http process.
type httpServer struct {
	*served
	url string
}

// freePort returns a loopback port nothing listens on.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startHTTP(ctx context.Context, orchestra, cfg string, env []string) (*httpServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s, err := start(limited(ctx, orchestra, "serve", "--http", addr, "--config", cfg, "--store", "memory"), env)
	if err != nil {
		return nil, err
	}
	h := &httpServer{served: s, url: "http://" + addr}
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(h.url + "/healthz"); err == nil {
			resp.Body.Close()
			return h, nil
		}
		if !s.alive() {
			return nil, fmt.Errorf("the HTTP server exited: %v\n%s", s.err, s.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("the HTTP server did not answer /healthz within %s\n%s", startTimeout, s.stderr)
}

// mcpHeaders are the standard headers of a 2026-07-28 request: its method,
// and the name of the tool or resource it calls or reads.
type mcpHeaders struct{ method, name string }

var (
	methodRe = regexp.MustCompile(`"method":"([^"]*)"`)
	nameRe   = regexp.MustCompile(`"(?:name|uri)":"([^"]*)"`)
)

// headersOf reads the standard headers from a message's text (which
// may be too deep or too large for a decoder): its method, and for
// tools/call and resources/read its first name or URI.
func headersOf(line string) mcpHeaders {
	var hd mcpHeaders
	if m := methodRe.FindStringSubmatch(line); m != nil {
		hd.method = m[1]
	}
	if hd.method == "tools/call" || hd.method == "resources/read" {
		if m := nameRe.FindStringSubmatch(line); m != nil {
			hd.name = m[1]
		}
	}
	return hd
}

// post sends body (a reader, so that it may be slow or endless) to /mcp as
// a stateless 2026-07-28 request with token, and returns the status and
// the JSON-RPC message of the answer (from a JSON body or an event
// stream), or the body's text.
func (h *httpServer) post(ctx context.Context, token string, body io.Reader, hd mcpHeaders, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/mcp", body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	if hd.method != "" {
		req.Header.Set("Mcp-Method", hd.method)
	}
	if hd.name != "" {
		req.Header.Set("Mcp-Name", hd.name)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return resp.StatusCode, data, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range bytes.Split(data, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(d, []byte(`"id"`)) {
				return resp.StatusCode, d, nil
			}
		}
	}
	return resp.StatusCode, data, nil
}
