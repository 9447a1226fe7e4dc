package builtin

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// blockedAddrError is a connection refused because the address is not on
// the public internet.
type blockedAddrError struct {
	addr   string
	reason string
}

func (e *blockedAddrError) Error() string {
	return fmt.Sprintf("refusing to connect to %s (%s): requests to private networks are off; "+
		"set http_request.allow_private_networks to true in the config file to allow them", e.addr, e.reason)
}

// specialPurpose lists the address blocks of the IANA IPv4 and IPv6
// Special-Purpose Address Registries that are not globally reachable, with
// multicast, and the reason a connection to each is refused. A few blocks
// the registries mark globally reachable are refused too, being within
// blocks that are not: 192.0.0.0/24 whole (its anycast entries are meant
// for the local network's gateway), and 2001::/23 whole (Teredo among
// them). IPv6 beyond these is refused outside the global unicast space
// 2000::/3. The first block that holds an address names it.
var specialPurpose = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified address (0.0.0.0)"},
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" address (0.0.0.0/8)`},
	{netip.MustParsePrefix("10.0.0.0/8"), "private address (10.0.0.0/8)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT address (100.64.0.0/10)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback address (127.0.0.0/8)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local address (169.254.0.0/16, where cloud metadata lives)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private address (172.16.0.0/12)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol address (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation address (192.0.2.0/24)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast address (192.88.99.0/24)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private address (192.168.0.0/16)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking address (198.18.0.0/15)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation address (198.51.100.0/24)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation address (203.0.113.0/24)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast address (224.0.0.0/4)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved address (240.0.0.0/4, the broadcast address included)"},

	{netip.MustParsePrefix("::/128"), "unspecified address (::)"},
	{netip.MustParsePrefix("::1/128"), "loopback address (::1)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local IPv4/IPv6 translation address (64:ff9b:1::/48)"},
	{netip.MustParsePrefix("100::/64"), "discard-only address (100::/64)"},
	{netip.MustParsePrefix("100:0:0:1::/64"), "dummy address (100:0:0:1::/64)"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol address (2001::/23, Teredo and benchmarking included)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation address (2001:db8::/32)"},
	{netip.MustParsePrefix("3fff::/20"), "documentation address (3fff::/20)"},
	{netip.MustParsePrefix("5f00::/16"), "segment routing address (5f00::/16)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private) address (fc00::/7)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local address (fe80::/10)"},
	{netip.MustParsePrefix("fec0::/10"), "site-local address (fec0::/10)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast address (ff00::/8)"},
}

var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	globalUnicast = netip.MustParsePrefix("2000::/3")
)

// classifyAddr returns why a connection to ip must be refused, or "" if ip
// is a public address. IPv6 forms that embed an IPv4 address (mapped,
// NAT64, 6to4) are judged by that address.
func classifyAddr(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return "invalid address"
	}
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		return classifyAddr(netip.AddrFrom4([4]byte(b[12:16])))
	}
	if ip.Is6() && sixToFour.Contains(ip) {
		b := ip.As16()
		return classifyAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, n := range specialPurpose {
		if n.prefix.Contains(ip) {
			return n.reason
		}
	}
	if ip.Is6() && !globalUnicast.Contains(ip) {
		return "reserved IPv6 address (outside the global unicast space 2000::/3)"
	}
	return ""
}

// guardDial is a net.Dialer ControlContext that refuses non-public
// addresses and this host's own. It runs after name resolution, on the
// address actually dialed, so host names resolving to private addresses
// and redirects to them are refused too.
func guardDial(address string, own func() []netip.Addr) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedAddrError{addr: address, reason: "unparsable address"}
	}
	if reason := classifyAddr(ap.Addr()); reason != "" {
		return &blockedAddrError{addr: ap.Addr().String(), reason: reason}
	}
	addr := ap.Addr().Unmap().WithZone("")
	for _, a := range own() {
		if a == addr {
			return &blockedAddrError{addr: addr.String(), reason: "an address of this host's own network interfaces"}
		}
	}
	return nil
}

// hostAddrs keeps the addresses of this host's network interfaces.
type hostAddrs struct {
	mu    sync.Mutex
	read  time.Time
	addrs []netip.Addr
}

// get returns the addresses of this host's network interfaces, read again
// at most once every few seconds.
func (h *hostAddrs) get() []netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.read) < 5*time.Second {
		return h.addrs
	}
	h.read = time.Now()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return h.addrs
	}
	var own []netip.Addr // a new slice: callers may hold the old one
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			own = append(own, p.Addr().Unmap().WithZone(""))
		}
	}
	h.addrs = own
	return own
}

// Listeners are the addresses a program serves orchestra on: http_request
// refuses to connect to them, whether private networks are allowed or not,
// so that a plan cannot send a request to its own server. The zero value
// is empty and ready to use; Listeners are safe for concurrent use.
type Listeners struct {
	mu    sync.Mutex
	addrs []netip.AddrPort
}

// Add records that the program serves on addr (a listener's address). Call
// the returned func when the listener closes.
func (l *Listeners) Add(addr net.Addr) (remove func()) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return func() {}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	l.mu.Lock()
	l.addrs = append(l.addrs, ap)
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if i := slices.Index(l.addrs, ap); i >= 0 {
			l.addrs = slices.Delete(l.addrs, i, i+1)
		}
	}
}

// reaches reports whether dialing target reaches one of the listeners: the
// same address and port, or, for a listener on all addresses, a loopback
// or interface address of this host at its port. Nil Listeners reach
// nothing.
func (l *Listeners) reaches(target netip.AddrPort, own func() []netip.Addr) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	addrs := slices.Clone(l.addrs)
	l.mu.Unlock()
	ip := target.Addr().Unmap().WithZone("")
	for _, a := range addrs {
		if a.Port() != target.Port() {
			continue
		}
		if a.Addr() == ip {
			return true
		}
		if a.Addr().IsUnspecified() && (ip.IsLoopback() || ip.IsUnspecified() || slices.Contains(own(), ip)) {
			return true
		}
	}
	return false
}

// selfError is a request to this process's own listener.
type selfError struct{ addr string }

func (e *selfError) Error() string {
	return fmt.Sprintf("refusing to connect to %s: it is this orchestra server's own address, and a plan may not call its own server", e.addr)
}

// hostMatcher decides whether a URL host is in the allow list.
type hostMatcher struct {
	any      bool
	exact    map[string]bool
	suffixes []string // ".example.com" for "*.example.com"
	patterns []string // as configured, for messages
}

func newHostMatcher(patterns []string) *hostMatcher {
	m := &hostMatcher{exact: map[string]bool{}}
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		m.patterns = append(m.patterns, p)
		switch {
		case p == "*":
			m.any = true
		case strings.HasPrefix(p, "*."):
			m.suffixes = append(m.suffixes, strings.TrimSuffix(p[1:], "."))
		default:
			m.exact[normalizeHostPattern(p)] = true
		}
	}
	return m
}

// normalizeHostPattern reduces "https://api.example.com:443/x" or "[::1]" to
// the bare host name.
func normalizeHostPattern(p string) string {
	if !strings.Contains(p, "://") {
		p = "//" + p
	}
	if u, err := url.Parse(p); err == nil && u.Hostname() != "" {
		p = u.Hostname()
	}
	return strings.TrimSuffix(p, ".")
}

// allows reports whether host (a URL's Hostname) is allowed.
func (m *hostMatcher) allows(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	if m.any || m.exact[host] {
		return true
	}
	for _, s := range m.suffixes {
		if len(host) > len(s) && strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// hostNotAllowedError is a request to a host outside the allow list.
type hostNotAllowedError struct {
	host    string
	allowed []string
}

func (e *hostNotAllowedError) Error() string {
	return fmt.Sprintf("host %q is not allowed (allowed hosts: %s); use one of those hosts, "+
		"or add %q to http_request.allowed_hosts in the config file", e.host, strings.Join(e.allowed, ", "), e.host)
}
