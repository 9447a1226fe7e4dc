package server_test

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// fakeDNS answers A queries for the names in its table over UDP on
// loopback, and nothing else: a resolver pointed at it resolves names the
// test chooses to the addresses the test chooses.
type fakeDNS struct {
	conn  net.PacketConn
	names map[string]netip.Addr
}

func newFakeDNS(t *testing.T, names map[string]netip.Addr) *fakeDNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDNS{conn: conn, names: names}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serve()
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return d
}

// Resolver returns a Go resolver that asks only this server.
func (d *fakeDNS) Resolver() *net.Resolver {
	addr := d.conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", addr)
	}}
}

func (d *fakeDNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.answer(buf[:n]); resp != nil {
			_, _ = d.conn.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query: the question echoed, and an A
// record when the name is known and the query is for A.
func (d *fakeDNS) answer(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	// The question: labels up to a zero byte, then type and class.
	i := 12
	var labels []string
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+l]))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	question := q[12 : i+5]
	name := strings.ToLower(strings.Join(labels, "."))
	addr, known := d.names[name]
	resp := make([]byte, 12, 12+len(question)+16)
	copy(resp, q[:2])                            // id
	binary.BigEndian.PutUint16(resp[2:], 0x8180) // response, recursion available
	binary.BigEndian.PutUint16(resp[4:], 1)      // one question
	rcode := uint16(0)
	if !known {
		rcode = 3 // NXDOMAIN
	}
	resp[3] |= byte(rcode)
	resp = append(resp, question...)
	if known && qtype == 1 && addr.Is4() {
		binary.BigEndian.PutUint16(resp[6:], 1) // one answer
		a4 := addr.As4()
		resp = append(resp, 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		resp = append(resp, a4[:]...)
	}
	return resp
}
