package httpedge

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/orchestra-mcp/orchestra/config"
)

// limitListener caps the connections a listener holds open: max in all
// and perClient from one remote address. A connection beyond either cap is
// answered with 503 and closed at once, so that stalled connections can
// neither exhaust the process's file descriptors nor, from one address,
// take the slots of everyone else.
type limitListener struct {
	net.Listener
	max, perClient int
	log            *slog.Logger

	mu      sync.Mutex
	open    int
	byHost  map[string]int
	refused int // since the last warning
	warned  time.Time
}

// LimitConnections caps the connections ln holds open as cfg says:
// server.max_connections in all, lowered to fit the process's limit of
// open files, and server.max_connections_per_client from one address.
func LimitConnections(ln net.Listener, cfg config.Server, log *slog.Logger) net.Listener {
	return newLimitListener(ln, connectionCap(cfg.MaxConnections, openFileLimit(), log), cfg.MaxConnectionsPerClient, log)
}

func newLimitListener(ln net.Listener, max, perClient int, log *slog.Logger) net.Listener {
	if max <= 0 && perClient <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: max, perClient: perClient, log: log, byHost: map[string]int{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := remoteHost(c)
		l.mu.Lock()
		why := ""
		switch {
		case l.max > 0 && l.open >= l.max:
			why = fmt.Sprintf("the server holds %d connections, its limit (server.max_connections)", l.open)
		case l.perClient > 0 && l.byHost[host] >= l.perClient:
			why = fmt.Sprintf("this address holds %d connections, its limit (server.max_connections_per_client)", l.byHost[host])
		}
		if why != "" {
			l.refused++
			if time.Since(l.warned) > 10*time.Second {
				l.log.Warn("refusing connections over the limit", "refused", l.refused, "open", l.open, "reason", why)
				l.refused, l.warned = 0, time.Now()
			}
			l.mu.Unlock()
			refuse(c, why)
			continue
		}
		l.open++
		l.byHost[host]++
		l.mu.Unlock()
		return &limitConn{Conn: c, l: l, host: host}, nil
	}
}

func (l *limitListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

// refuse answers a connection that is over a limit and closes it. The
// answer fits in the socket's buffer, so the write does not wait for the
// client.
func refuse(c net.Conn, why string) {
	body := why + ": retry in a moment\n"
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nRetry-After: 1\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.Close()
}

func remoteHost(c net.Conn) string {
	addr := c.RemoteAddr()
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// limitConn gives its slot back once, when it closes.
type limitConn struct {
	net.Conn
	l    *limitListener
	host string
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}

// fileReserve is how many open files are kept for what is not an HTTP
// connection: the store, downstream servers, logs.
const fileReserve = 256

// connectionCap returns the connection cap to enforce: server.max_connections,
// lowered to fit the process's limit of open files when that is lower, so
// that connections can never exhaust the descriptors everything else needs.
func connectionCap(configured, files int, log *slog.Logger) int {
	if files <= 0 {
		return configured
	}
	fit := max(files-fileReserve, files/2)
	if configured <= 0 || configured > fit {
		log.Info("connection cap lowered to fit the limit of open files", "max_connections", configured, "open_file_limit", files, "cap", fit)
		return fit
	}
	return configured
}
