package builtin

import (
	"encoding/csv"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

func TestClassifyAddr(t *testing.T) {
	tests := []struct {
		addr   string
		reason string // how the reason starts; "" for public
	}{
		{"127.0.0.1", "loopback address"},
		{"127.255.0.9", "loopback address"},
		{"::1", "loopback address"},
		{"10.1.2.3", "private address"},
		{"172.16.0.1", "private address"},
		{"172.31.255.255", "private address"},
		{"192.168.1.1", "private address"},
		{"fc00::1", "unique local (private) address"},
		{"fd12:3456::1", "unique local (private) address"},
		{"169.254.169.254", "link-local address"},
		{"fe80::1", "link-local address"},
		{"fe80::1%eth0", "link-local address"},
		{"0.0.0.0", "unspecified address"},
		{"::", "unspecified address"},
		{"0.1.2.3", `"this network" address`},
		{"224.0.0.1", "multicast address"},
		{"ff02::1", "multicast address"},
		{"100.64.0.1", "carrier-grade NAT address"},
		{"100.127.255.254", "carrier-grade NAT address"},
		{"255.255.255.255", "reserved address"},
		{"::ffff:10.0.0.1", "private address"},
		{"::ffff:127.0.0.1", "loopback address"},
		{"64:ff9b::7f00:1", "loopback address"},
		{"2002:a9fe:a9fe::1", "link-local address"},
		// The documentation, benchmarking and relay ranges, which were
		// taken for public.
		{"192.0.2.2", "documentation address"},
		{"::ffff:192.0.2.2", "documentation address"},
		{"198.51.100.7", "documentation address"},
		{"203.0.113.9", "documentation address"},
		{"192.88.99.1", "6to4 relay anycast address"},
		{"198.18.0.1", "benchmarking address"},
		{"2001:db8::1", "documentation address"},
		{"3fff::1", "documentation address"},
		{"2001:2::1", "IETF protocol address"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "IETF protocol address"}, // Teredo
		{"::7f00:1", "reserved IPv6 address"},                             // IPv4-compatible, deprecated
		{"4000::1", "reserved IPv6 address"},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"192.31.196.1", ""}, // AS112, globally reachable
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::1", ""},
	}
	for _, tt := range tests {
		got := classifyAddr(netip.MustParseAddr(tt.addr))
		if (got == "") != (tt.reason == "") || !strings.HasPrefix(got, tt.reason) {
			t.Errorf("classifyAddr(%s) = %q, want %q...", tt.addr, got, tt.reason)
		}
	}
}

// ianaBlock is one entry of the IANA special-purpose registries.
type ianaBlock struct {
	prefix    netip.Prefix
	name      string
	reachable string // "true", "false" or "n/a"
}

func loadIANA(t testing.TB) []ianaBlock {
	t.Helper()
	f, err := os.Open("testdata/iana-special-purpose.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comment = '#'
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var blocks []ianaBlock
	for _, row := range rows[1:] {
		blocks = append(blocks, ianaBlock{netip.MustParsePrefix(row[0]), row[1], row[2]})
	}
	return blocks
}

// checkAgainstIANA checks classifyAddr on ip against the registries:
// an address of a block that is not globally reachable is refused; an
// IPv4 address of no block is accepted, and so is an IPv6 address of no
// block within 2000::/3, and none outside it; forms that embed an IPv4
// address are judged by it. Blocks marked globally reachable may be
// refused (some lie within blocks that are not).
func checkAgainstIANA(t *testing.T, blocks []ianaBlock, ip netip.Addr) {
	t.Helper()
	got := classifyAddr(ip)
	ip = ip.Unmap()
	if ip.Is6() && (nat64.Contains(ip) || sixToFour.Contains(ip)) {
		b := ip.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:16]))
		if sixToFour.Contains(ip) {
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if want := classifyAddr(v4); (got == "") != (want == "") {
			t.Fatalf("classifyAddr(%s) = %q, but the address it embeds, %s, gives %q", ip, got, v4, want)
		}
		return
	}
	var best *ianaBlock
	for i, b := range blocks {
		if b.prefix.Contains(ip) && (best == nil || b.prefix.Bits() > best.prefix.Bits()) {
			best = &blocks[i]
		}
	}
	switch {
	case best != nil && best.reachable != "true":
		if got == "" {
			t.Fatalf("classifyAddr(%s) accepts it; it is in %s (%s), not globally reachable", ip, best.prefix, best.name)
		}
	case best != nil:
		// Globally reachable: either answer is safe.
	case ip.Is4() || netip.MustParsePrefix("2000::/3").Contains(ip):
		if got != "" {
			t.Fatalf("classifyAddr(%s) = %q; it is in no special-purpose block", ip, got)
		}
	default:
		if got == "" {
			t.Fatalf("classifyAddr(%s) accepts an IPv6 address outside the global unicast space", ip)
		}
	}
	if got != "" && !strings.Contains(got, "address") {
		t.Fatalf("classifyAddr(%s) = %q does not say what kind of address it is", ip, got)
	}
}

// TestClassifyAddrIANA checks the first, last and a middle address of
// every registry block, and the addresses just outside it.
func TestClassifyAddrIANA(t *testing.T) {
	blocks := loadIANA(t)
	if len(blocks) < 40 {
		t.Fatalf("only %d blocks read", len(blocks))
	}
	for _, b := range blocks {
		first := b.prefix.Masked().Addr()
		last := lastAddr(b.prefix)
		for _, ip := range []netip.Addr{first, last, first.Next(), last.Prev(), first.Prev(), last.Next()} {
			if ip.IsValid() {
				checkAgainstIANA(t, blocks, ip)
			}
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// FuzzClassifyAddr checks classifyAddr on any address against the IANA
// special-purpose registries.
func FuzzClassifyAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "192.0.2.2", "::ffff:192.0.2.2", "2001:db8::1", "64:ff9b::a00:1", "2002:c000:202::", "8.8.8.8", "2606:4700::1", "fe80::1", "::"} {
		a := netip.MustParseAddr(s)
		b := a.As16()
		f.Add(b[:], a.Is4())
	}
	blocks := loadIANA(f)
	f.Fuzz(func(t *testing.T, raw []byte, v4 bool) {
		var b [16]byte
		copy(b[:], raw)
		ip := netip.AddrFrom16(b)
		if v4 {
			ip = netip.AddrFrom4([4]byte(b[12:16]))
		}
		checkAgainstIANA(t, blocks, ip)
	})
}

// TestOwnAddressesRefused: an address of this host's own interfaces is
// refused even when it looks public.
func TestOwnAddressesRefused(t *testing.T) {
	opts := testOpts
	opts.hostAddrs = func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("8.8.4.4")} }
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"*"}}, opts)
	for _, u := range []string{"http://8.8.4.4/", "http://[::ffff:8.8.4.4]/"} {
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, u))
		wantToolError(t, res, err, "refusing to connect to 8.8.4.4", "this host's own network interfaces")
	}
}

// TestOwnListenerRefused: a plan may not send a request to the server it
// runs in, even with private networks allowed.
func TestOwnListenerRefused(t *testing.T) {
	srv, hits := newTestServer(t)
	var listeners Listeners
	opts := testOpts
	opts.Listeners = &listeners
	tool := HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1", "localhost"}, AllowPrivateNetworks: true}, opts)
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	forget := listeners.Add(srv.Listener.Addr())
	for _, u := range []string{srv.URL + "/text", "http://localhost:" + port + "/text"} {
		res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, u))
		wantToolError(t, res, err, "this orchestra server's own address", "may not call its own server")
	}
	forget()
	res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/text"))
	if err != nil || res.IsError {
		t.Fatalf("after the listener is forgotten: %v, %v", res.Text(), err)
	}

	// A listener on every address covers loopback. (A new tool: the
	// guard runs when a connection is dialed, and the one above is kept
	// alive; a server registers its listeners before it serves.)
	ln := netip.MustParseAddrPort("[::]:" + port)
	forget = listeners.Add(addrOf(ln))
	defer forget()
	tool = HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1", "localhost"}, AllowPrivateNetworks: true}, opts)
	res, err = call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/text"))
	wantToolError(t, res, err, "this orchestra server's own address")

	// Listeners are the program's that made them: a tool made with others
	// (another server in the same process) is not refused this address.
	tool = HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1", "localhost"}, AllowPrivateNetworks: true}, testOpts)
	if res, err := call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/text")); err != nil || res.IsError {
		t.Fatalf("a tool without these listeners: %v, %v", res.Text(), err)
	}
	tool = HTTPRequest(HTTPConfig{AllowedHosts: []string{"127.0.0.1", "localhost"}, AllowPrivateNetworks: true}, opts)
	res, err = call(t, tool, fmt.Sprintf(`{"url": %q}`, srv.URL+"/text"))
	wantToolError(t, res, err, "this orchestra server's own address")
	if n := hits.Load(); n != 2 {
		t.Errorf("the server received %d requests, want only the one made after the listener was forgotten and the one of the tool without listeners", n)
	}
}

type tcpAddr netip.AddrPort

func (a tcpAddr) Network() string { return "tcp" }
func (a tcpAddr) String() string  { return netip.AddrPort(a).String() }

func addrOf(ap netip.AddrPort) tcpAddr { return tcpAddr(ap) }
