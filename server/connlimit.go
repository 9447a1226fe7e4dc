package server

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
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
