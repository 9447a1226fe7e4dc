package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/redact"
	"github.com/orchestra-mcp/orchestra/registry"
)

// server is one configured downstream server and its run loop.
type server struct {
	m    *Manager
	name string
	cfg  ServerConfig
	log  *slog.Logger

	refresh  chan struct{}  // tools/list_changed arrived
	disabled bool           // set once by NewManager
	tooDeep  bool           // disabled for the process's depth
	secrets  redact.Secrets // cut out of errors and logs

	mu             sync.Mutex
	state          State
	err            error
	since          time.Time
	restarts       int
	conn           *connection // while connected
	tools          []string
	toolProblems   []string
	schemaProblems map[string]string
	stderr         []*os.File // read ends of stderr pipes being logged
}

// connection is one session with the server.
type connection struct {
	session *mcp.ClientSession
	cmd     *exec.Cmd       // stdio only
	http    *http.Transport // http only
	lost    chan struct{}   // closed by markLost
	once    sync.Once
	lostErr error
}

// markLost tells the run loop that calls found the connection broken.
func (c *connection) markLost(err error) {
	c.once.Do(func() {
		c.lostErr = err
		close(c.lost)
	})
}

// close ends the session and makes sure the process group is gone.
func (c *connection) close() {
	_ = c.session.Close()
	if c.cmd != nil {
		killGroup(c.cmd)
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}

func (s *server) setStateLocked(st State, err error) {
	if s.state != st {
		s.since = time.Now()
	}
	s.state, s.err = st, s.secrets.Error(err)
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{
		Name:           s.name,
		Transport:      s.cfg.transport(),
		State:          s.state,
		Since:          s.since,
		Restarts:       s.restarts,
		Tools:          slices.Clone(s.tools),
		ToolProblems:   slices.Clone(s.toolProblems),
		SchemaProblems: maps.Clone(s.schemaProblems),
	}
	if st.Tools == nil {
		st.Tools = []string{}
	}
	if s.err != nil {
		st.Error = s.err.Error()
	}
	if s.conn != nil {
		if s.conn.cmd != nil && s.conn.cmd.Process != nil {
			st.PID = s.conn.cmd.Process.Pid
		}
		if r := s.conn.session.InitializeResult(); r != nil {
			st.ProtocolVersion = r.ProtocolVersion
		}
	}
	return st
}

// current returns the live connection, or nil and the reason there is none.
func (s *server) current() (*connection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	if s.err != nil {
		return nil, s.err
	}
	return nil, fmt.Errorf("server %s is %s", s.name, s.state)
}

// run starts the server, keeps it running and restarts it with backoff
// until ctx is done. It closes first after the first attempt.
func (s *server) run(ctx context.Context, first chan struct{}) {
	var firstOnce sync.Once
	firstDone := func() { firstOnce.Do(func() { close(first) }) }
	defer firstDone()

	min, max := s.m.opts.RetryBackoffMin, s.m.opts.RetryBackoffMax
	backoff := min
	// Connecting at start is routine; connecting again after a failure
	// or a restart is news.
	connected := slog.LevelDebug
	for {
		start := time.Now()
		c, err := s.connect(ctx)
		if err == nil {
			if err = s.load(ctx, c); err != nil {
				c.close()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			s.setStateLocked(StateFailed, err)
			s.mu.Unlock()
			s.log.Warn("downstream server failed to start", "error", err, "retry_in", backoff)
			connected = slog.LevelInfo
			firstDone()
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min2(backoff*2, max)
			continue
		}

		s.mu.Lock()
		s.conn = c
		s.setStateLocked(StateConnected, nil)
		n := len(s.tools)
		s.mu.Unlock()
		attrs := []any{"tools", n, "protocol", c.session.InitializeResult().ProtocolVersion}
		if c.cmd != nil {
			attrs = append(attrs, "pid", c.cmd.Process.Pid)
		}
		s.log.Log(ctx, connected, "downstream server connected", attrs...)
		connected = slog.LevelInfo
		firstDone()

		reason := s.serve(ctx, c)

		s.mu.Lock()
		s.conn = nil
		s.tools, s.toolProblems, s.schemaProblems = nil, nil, nil
		s.mu.Unlock()
		_ = s.m.cat.ReplaceSource(s.name, nil)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		s.restarts++
		s.setStateLocked(StateFailed, reason)
		s.mu.Unlock()
		// A server that ran for a while gets a quick restart; one that
		// keeps dying backs off.
		if time.Since(start) > max {
			backoff = min
		}
		s.log.Warn("downstream server stopped; restarting", "error", reason, "retry_in", backoff)
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min2(backoff*2, max)
	}
}

func min2(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// serve waits until the connection ends, refreshing the tools when the
// server says they changed. It returns why the connection ended.
func (s *server) serve(ctx context.Context, c *connection) error {
	ended := make(chan error, 1)
	go func() { ended <- c.session.Wait() }()
	for {
		select {
		case <-ctx.Done():
			c.close()
			<-ended
			return nil
		case err := <-ended:
			c.close()
			if err == nil {
				return errors.New("the server closed the connection")
			}
			return fmt.Errorf("the connection ended: %w", err)
		case <-c.lost:
			c.close()
			<-ended
			return c.lostErr
		case <-s.refresh:
			if err := s.load(ctx, c); err != nil {
				s.log.Warn("refreshing tools after tools/list_changed", "error", err)
			} else {
				s.log.Info("downstream tools changed", "tools", len(s.status().Tools))
			}
		}
	}
}

func (s *server) timeout() time.Duration {
	if s.cfg.Timeout > 0 {
		return time.Duration(s.cfg.Timeout)
	}
	return s.m.opts.ConnectTimeout
}

// connect starts the server (stdio) or opens a session (HTTP).
func (s *server) connect(ctx context.Context) (*connection, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: s.m.opts.ClientName, Version: s.m.opts.ClientVersion}, &mcp.ClientOptions{
		Logger: s.log,
		// No roots: orchestra has no workspace of its own to offer, and a
		// server that asks for roots should keep its configured ones.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.refresh <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: s.m.onProgress,
	})
	c := &connection{lost: make(chan struct{})}
	var t mcp.Transport
	if s.cfg.URL != "" {
		c.http = http.DefaultTransport.(*http.Transport).Clone()
		var rt http.RoundTripper = &headerTransport{base: c.http, headers: s.cfg.Headers}
		if limit := s.m.opts.MaxResponseBytes; limit > 0 {
			rt = &limitTransport{base: rt, limit: limit, notes: s.notes(), onDrop: s.dropped()}
		}
		t = &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: rt},
		}
	} else {
		st, err := s.command()
		if err != nil {
			return nil, err
		}
		c.cmd = st.cmd
		t = st
	}
	session, err := client.Connect(ctx, t, nil)
	if err != nil {
		if c.cmd != nil {
			killGroup(c.cmd)
			if ps := c.cmd.ProcessState; ps != nil && ps.Exited() {
				err = fmt.Errorf("%w (the process exited with status %d; its stderr is in the log)", err, ps.ExitCode())
			}
		}
		if c.http != nil {
			c.http.CloseIdleConnections()
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("connecting to %s: no answer within %s", s.describe(), s.timeout())
		}
		return nil, fmt.Errorf("connecting to %s: %w", s.describe(), err)
	}
	c.session = session
	return c, nil
}

// describe names the server's endpoint for messages: the command, or the
// URL without its credentials and query (which may carry secrets). Header
// values are never part of it.
func (s *server) describe() string {
	if s.cfg.URL != "" {
		u := s.cfg.URL
		if i := strings.IndexAny(u, "?#"); i >= 0 {
			u = u[:i]
		}
		if scheme, rest, ok := strings.Cut(u, "://"); ok {
			if at := strings.LastIndexByte(rest, '@'); at >= 0 {
				u = scheme + "://" + rest[at+1:]
			}
		}
		return u
	}
	return fmt.Sprintf("command %q", s.cfg.Command)
}

// load lists the server's tools and puts them in the catalog.
func (s *server) load(ctx context.Context, c *connection) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	var tools []registry.Tool
	var names, seen []string
	schemaProblems := map[string]string{}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		seen = append(seen, t.Name)
		if !s.cfg.wants(t.Name) {
			continue
		}
		rt := s.tool(t)
		if rt.SchemaProblem != "" {
			schemaProblems[rt.Name] = rt.SchemaProblem
			s.log.Warn("tool schema cannot be used for validation; the tool stays callable", "tool", rt.Name, "problem", rt.SchemaProblem)
		}
		tools = append(tools, rt)
	}
	var problems []string
	for _, want := range s.cfg.Tools {
		if !slices.Contains(seen, want) {
			problems = append(problems, fmt.Sprintf("tool %q is in the include list but the server has no such tool", want))
			s.log.Warn("included tool not found on the server", "tool", want)
		}
	}
	if err := s.m.cat.ReplaceSource(s.name, tools); err != nil {
		s.log.Error("some tools were not added to the catalog", "error", err)
		problems = append(problems, err.Error())
	}
	for _, t := range tools {
		if got, ok := s.m.cat.Lookup(t.Name); ok && got.Source == s.name {
			names = append(names, t.Name)
		}
	}
	slices.Sort(names)
	if len(schemaProblems) == 0 {
		schemaProblems = nil
	}
	s.mu.Lock()
	s.tools, s.toolProblems, s.schemaProblems = names, problems, schemaProblems
	s.mu.Unlock()
	return nil
}

// tool turns a downstream tool into a catalog tool.
func (s *server) tool(t *mcp.Tool) registry.Tool {
	name := s.name + "__" + t.Name
	var problems []string
	in, err := NormalizeSchema(t.InputSchema)
	switch {
	case err != nil:
		problems = append(problems, "inputSchema: "+err.Error())
		in = nil
	case in != nil && !isObjectSchema(in):
		problems = append(problems, "inputSchema does not describe an object")
		in = nil
	}
	if in == nil {
		in = &jsonschema.Schema{Type: "object"}
	}
	out, err := NormalizeSchema(t.OutputSchema)
	if err != nil {
		problems = append(problems, "outputSchema: "+err.Error())
		out = nil
	}
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	return registry.Tool{
		Name:          name,
		Title:         title,
		Description:   t.Description,
		InputSchema:   in,
		OutputSchema:  out,
		Annotations:   t.Annotations,
		Mode:          registry.ServerFinal,
		Source:        s.name,
		SchemaProblem: strings.Join(problems, "; "),
		Call:          s.caller(name, t.Name, out),
	}
}

// notes returns a limiter for the notifications of one connection.
func (s *server) notes() *notificationLimiter {
	return newNotificationLimiter(func(method string, n int) {
		s.log.Warn("dropped notifications from the server", "method", strings.Trim(method, `"`), "count", n,
			"why", "log notifications are not relayed, and others are limited to 200 a second")
	})
}

// dropped returns how a connection reports what its filter dropped.
func (s *server) dropped() func(reason string, sample []byte) {
	d := &dropReporter{report: func(reason string, sample []byte, more int) {
		attrs := []any{"what", reason}
		if len(sample) > 0 {
			attrs = append(attrs, "sample", string(sample))
		}
		if more > 0 {
			attrs = append(attrs, "dropped_since_last_report", more)
		}
		s.log.Warn("dropped output of the server", attrs...)
	}}
	return d.drop
}

func (s *server) closeStderr() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.stderr {
		_ = f.Close()
	}
}

// headerTransport adds configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}
