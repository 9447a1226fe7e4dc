package builtin

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
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

// nonPublic lists the address ranges refused unless private networks are
// allowed, beyond what netip.Addr's predicates cover.
var nonPublic = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved address"},
	{netip.MustParsePrefix("100::/64"), "discard-only address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local NAT64 address"},
	{netip.MustParsePrefix("fec0::/10"), "site-local address"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// classifyAddr returns why a connection to ip must be refused, or "" if ip
// is a public address.
func classifyAddr(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	// IPv6 forms that embed an IPv4 address are judged by that address.
	if ip.Is6() && nat64.Contains(ip) {
		b := ip.As16()
		return classifyAddr(netip.AddrFrom4([4]byte(b[12:16])))
	}
	if ip.Is6() && sixToFour.Contains(ip) {
		b := ip.As16()
		return classifyAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	switch {
	case !ip.IsValid():
		return "invalid address"
	case ip.IsUnspecified():
		return "unspecified address"
	case ip.IsLoopback():
		return "loopback address"
	case ip.IsPrivate():
		return "private address"
	case ip.IsLinkLocalUnicast():
		return "link-local address"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast address"
	}
	for _, n := range nonPublic {
		if n.prefix.Contains(ip) {
			return n.reason
		}
	}
	return ""
}

// guardDial is a net.Dialer ControlContext that refuses non-public
// addresses. It runs after name resolution, on the address actually dialed,
// so host names resolving to private addresses and redirects to them are
// refused too.
func guardDial(_ context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedAddrError{addr: address, reason: "unparsable address"}
	}
	if reason := classifyAddr(ap.Addr()); reason != "" {
		return &blockedAddrError{addr: ap.Addr().String(), reason: reason}
	}
	return nil
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
