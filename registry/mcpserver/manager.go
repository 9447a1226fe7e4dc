package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchestra-mcp/orchestra/internal/redact"
	"github.com/orchestra-mcp/orchestra/registry"
)

// Options configures a Manager. The zero value is usable.
type Options struct {
	// Logger receives connection events, schema problems and the stderr of
	// stdio servers. Nil discards them.
	Logger *slog.Logger
	// ConnectTimeout bounds one attempt to start a server and list its
	// tools, unless the server's own Timeout is set. Default 30s.
	ConnectTimeout time.Duration
	// ClientName and ClientVersion identify orchestra to the servers.
	// Defaults "orchestra" and "dev".
	ClientName, ClientVersion string
	// MaxResponseBytes is the largest tool result, as JSON, that a call
	// accepts; larger ones fail the call. Default 8 MiB; negative means no
	// limit.
	MaxResponseBytes int64
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff
	// between attempts to start a server that failed or died. Defaults 1s
	// and 1m.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// MaxDepth, when positive, is how many orchestras may run under one
	// another as stdio servers (see ProcessDepth): at that depth no server
	// is started, so that an orchestra configured as its own downstream
	// server stops there instead of starting copies without end.
	MaxDepth int
}

const (
	defaultConnectTimeout   = 30 * time.Second
	defaultMaxResponseBytes = 8 << 20
	defaultBackoffMin       = time.Second
	defaultBackoffMax       = time.Minute
	// terminateGrace is how long a stdio server has to exit after its stdin
	// is closed, and then after SIGTERM, before it is killed.
	terminateGrace = 2 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = defaultConnectTimeout
	}
	if o.ClientName == "" {
		o.ClientName = "orchestra"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = defaultMaxResponseBytes
	}
	if o.RetryBackoffMin <= 0 {
		o.RetryBackoffMin = defaultBackoffMin
	}
	if o.RetryBackoffMax < o.RetryBackoffMin {
		o.RetryBackoffMax = max(defaultBackoffMax, o.RetryBackoffMin)
	}
	return o
}

// State is where a server is in its life.
type State string

// The states of a server.
const (
	// StateConnecting: the first attempt to start the server is under way.
	StateConnecting State = "connecting"
	// StateConnected: the server is running and its tools are in the catalog.
	StateConnected State = "connected"
	// StateFailed: the server failed to start or died; its tools are not in
	// the catalog and it is being retried.
	StateFailed State = "failed"
	// StateDisabled: the configuration disables the server, or it is invalid.
	StateDisabled State = "disabled"
	// StateClosed: the manager was closed.
	StateClosed State = "closed"
)

// ServerStatus describes one configured server, for `orchestra tools` and
// the logs.
type ServerStatus struct {
	// Name is the server's name in the configuration.
	Name string `json:"name"`
	// Transport is "stdio" or "http".
	Transport string `json:"transport"`
	// State is the server's state.
	State State `json:"state"`
	// Error says why the server is failed or disabled; empty otherwise.
	Error string `json:"error,omitempty"`
	// Since is when the server entered State.
	Since time.Time `json:"since"`
	// Restarts counts the connections lost after the server had started.
	Restarts int `json:"restarts"`
	// PID is the process id of a connected stdio server, 0 otherwise.
	PID int `json:"pid,omitempty"`
	// ProtocolVersion is the MCP version agreed with the server.
	ProtocolVersion string `json:"protocol_version,omitempty"`
	// Tools are the catalog names of the server's tools now in the
	// catalog; len(Tools) is the tool count.
	Tools []string `json:"tools"`
	// ToolProblems lists tools that could not be added to the catalog:
	// invalid names and collisions with other sources.
	ToolProblems []string `json:"tool_problems,omitempty"`
	// SchemaProblems maps the catalog names of tools whose schemas cannot
	// be used for plan-time validation to the reason. Those tools are
	// callable, with a permissive input schema.
	SchemaProblems map[string]string `json:"schema_problems,omitempty"`
}

// A Manager connects to downstream MCP servers as a client and keeps their
// tools in a catalog: it adds them once a server has started, refreshes them
// when the server says its tool list changed, removes them when the server
// dies, and restarts failed servers in the background.
//
// Tools are named <server>__<tool> and have the server name as Source.
type Manager struct {
	cat     *registry.Catalog
	opts    Options
	log     *slog.Logger
	servers map[string]*server
	names   []string

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // run loops
	io     sync.WaitGroup // stderr readers

	startOnce sync.Once
	closeOnce sync.Once

	progressTag string // "orchestra-<manager>-", what every token starts with
	progressSeq atomic.Uint64
	progress    sync.Map // progress token (string) -> func(registry.Progress)
}

// NewManager returns a manager for servers whose tools go into cat. It
// starts nothing: call Start. Servers whose configuration is invalid are
// reported by Status as disabled, with the reason.
func NewManager(servers map[string]ServerConfig, cat *registry.Catalog, opts Options) *Manager {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		cat:     cat,
		opts:    opts,
		log:     opts.Logger,
		servers: make(map[string]*server, len(servers)),
		ctx:     ctx,
		cancel:  cancel,
	}
	m.progressTag = fmt.Sprintf("orchestra-%p-", m)
	now := time.Now()
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		cfg := servers[name]
		s := &server{
			m:       m,
			name:    name,
			cfg:     cfg,
			log:     m.log.With("server", name),
			state:   StateConnecting,
			since:   now,
			refresh: make(chan struct{}, 1),
		}
		s.secrets = redact.New(cfg.Secrets()...)
		if err := cfg.Validate(name); err != nil {
			s.state, s.err, s.disabled = StateDisabled, s.secrets.Error(err), true
		} else if cfg.Disabled {
			s.state, s.err, s.disabled = StateDisabled, errors.New("disabled in the configuration"), true
		} else if d := ProcessDepth(); opts.MaxDepth > 0 && d >= opts.MaxDepth {
			s.tooDeep = true
			s.state, s.err, s.disabled = StateDisabled, fmt.Errorf("not started: this orchestra runs %d levels deep under other orchestras (%s=%d), the limit (limits.max_depth); "+
				"an orchestra that lists itself as a downstream server stops here", d, EnvDepth, d), true
		}
		m.servers[name] = s
		m.names = append(m.names, name)
	}
	return m
}

// Start connects to every enabled server concurrently, each attempt bounded
// by the connect timeout, and returns when every server has connected or
// failed once, or when ctx is done. Servers that failed are retried in the
// background with exponential backoff until Close. Start never fails: see
// Status and the logs for servers that did not start. Calling Start more
// than once does nothing.
func (m *Manager) Start(ctx context.Context) {
	var pending []chan struct{}
	m.startOnce.Do(func() {
		if m.ctx.Err() != nil {
			return // closed before it started
		}
		for _, name := range m.names {
			s := m.servers[name]
			if s.disabled {
				switch {
				case s.cfg.Disabled:
					s.log.Info("downstream server disabled")
				case s.tooDeep:
					s.log.Info("downstream server not started", "reason", s.err)
				default:
					s.log.Error("downstream server not started", "error", s.err)
				}
				continue
			}
			first := make(chan struct{})
			pending = append(pending, first)
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				s.run(m.ctx, first)
			}()
		}
	})
	for _, ch := range pending {
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		}
	}
}

// Status reports every configured server, sorted by name.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(m.names))
	for _, name := range m.names {
		out = append(out, m.servers[name].status())
	}
	return out
}

// Exposed reports whether the catalog tool called toolName may be listed
// directly to orchestra's own clients: false only for tools of a server
// configured with "expose": false. Tools of no configured server are
// exposed.
func (m *Manager) Exposed(toolName string) bool {
	server, _, ok := strings.Cut(toolName, "__")
	if !ok {
		return true
	}
	s, ok := m.servers[server]
	if !ok {
		return true
	}
	return s.cfg.exposed()
}

// Close stops retrying, closes every session and removes the servers' tools
// from the catalog. When it returns, the processes of stdio servers (and
// their process groups) are gone. Close is idempotent.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.cancel()
		m.wg.Wait()
		done := make(chan struct{})
		go func() { m.io.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(terminateGrace):
			// A process that left its group still holds a stderr pipe.
			for _, s := range m.servers {
				s.closeStderr()
			}
			<-done
		}
		for _, s := range m.servers {
			s.mu.Lock()
			if !s.disabled {
				s.setStateLocked(StateClosed, nil)
			}
			s.mu.Unlock()
		}
	})
	return nil
}

// onProgress routes a progress notification to the call that asked for it.
func (m *Manager) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if f, ok := m.progress.Load(tok); ok {
		f.(func(registry.Progress))(registry.Progress{
			Progress: req.Params.Progress,
			Total:    req.Params.Total,
			Message:  req.Params.Message,
		})
	}
}

// newProgressToken returns a token no other call of this process uses.
func (m *Manager) newProgressToken() string {
	return m.progressTag + strconv.FormatUint(m.progressSeq.Add(1), 10)
}

// sleepCtx waits d or until ctx is done, reporting whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
