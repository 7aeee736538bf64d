package push_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/push"
)

// specialPurpose lists, for every IANA special-purpose range that is not
// globally reachable (IPv4 and IPv6 registries), and for every IPv6 form
// that carries an IPv4 address, addresses at its edges with a word the
// refusal must name. The first and last address of each range are both
// refused; the address just outside is in publicEdges.
var specialPurpose = []struct{ addr, why string }{
	{"0.0.0.0", "this network"},
	{"0.255.255.255", "this network"},
	{"10.0.0.0", "private"},
	{"10.255.255.255", "private"},
	{"100.64.0.0", "carrier-grade NAT"},
	{"100.127.255.255", "carrier-grade NAT"},
	{"127.0.0.1", "loopback"},
	{"127.255.255.254", "loopback"},
	{"169.254.0.1", "link-local"},
	{"169.254.169.254", "link-local"},
	{"172.16.0.0", "private"},
	{"172.31.255.255", "private"},
	{"192.0.0.0", "IETF protocol assignments"},
	{"192.0.0.170", "IETF protocol assignments"},
	{"192.0.0.255", "IETF protocol assignments"},
	{"192.0.2.0", "documentation"},
	{"192.0.2.2", "documentation"},
	{"192.0.2.255", "documentation"},
	{"192.88.99.1", "6to4 relay"},
	{"192.168.0.0", "private"},
	{"192.168.255.255", "private"},
	{"198.18.0.0", "benchmarking"},
	{"198.19.255.255", "benchmarking"},
	{"198.51.100.7", "documentation"},
	{"203.0.113.9", "documentation"},
	{"224.0.0.1", "multicast"},
	{"239.255.255.255", "multicast"},
	{"240.0.0.1", "reserved"},
	{"254.255.255.255", "reserved"},
	{"255.255.255.255", "broadcast"},

	{"::", "unspecified"},
	{"::1", "loopback"},
	{"::ffff:8.8.8.8", "IPv4-mapped"},
	{"::ffff:127.0.0.1", "loopback"},
	{"::ffff:192.0.2.2", "documentation"},
	{"::ffff:198.18.0.1", "benchmarking"},
	{"::127.0.0.1", "IPv4-compatible"},
	{"::192.0.2.2", "IPv4-compatible"},
	{"::8.8.8.8", "IPv4-compatible"},
	{"64:ff9b::7f00:1", "loopback address behind NAT64"},
	{"64:ff9b::c000:202", "documentation address (TEST-NET-1) behind NAT64"},
	{"64:ff9b::a9fe:a9fe", "link-local address (where cloud metadata services answer) behind NAT64"},
	{"64:ff9b:1::1", "local-use NAT64"},
	{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "local-use NAT64"},
	{"100::1", "discard-only"},
	{"100::ffff:ffff:ffff:ffff", "discard-only"},
	{"100:0:0:1::1", "dummy"},
	{"2001::1", "Teredo"},
	{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
	{"2001:2::1", "IETF protocol assignments"},
	{"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol assignments"},
	{"2001:db8::1", "documentation"},
	{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"},
	{"2002:7f00:1::", "loopback address in 6to4"},
	{"2002:7f00:1::1", "loopback address in 6to4"},
	{"2002:c000:202::1", "documentation address (TEST-NET-1) in 6to4"},
	{"2002:a9fe:a9fe::", "link-local address (where cloud metadata services answer) in 6to4"},
	{"2002:0a00:0001::", "private address (RFC 1918) in 6to4"},
	{"3fff::1", "documentation"},
	{"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation"},
	{"5f00::1", "segment routing"},
	{"fc00::1", "unique local"},
	{"fd00::2", "unique local"},
	{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique local"},
	{"fe80::1", "link-local"},
	{"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local"},
	{"fec0::1", "site-local"},
	{"ff02::1", "multicast"},
	{"ff0e::1", "multicast"},
}

// publicEdges are globally reachable addresses, most just outside a refused
// range, and v4-embedding forms of a public IPv4 address that stay usable.
var publicEdges = []string{
	"1.1.1.1",
	"8.8.8.8",
	"9.255.255.255",
	"11.0.0.0",
	"100.63.255.255",
	"100.128.0.0",
	"126.255.255.255",
	"128.0.0.0",
	"169.253.255.255",
	"169.255.0.0",
	"172.15.255.255",
	"172.32.0.0",
	"191.255.255.255",
	"192.0.1.255",
	"192.0.3.0",
	"192.88.98.255",
	"192.88.100.0",
	"192.167.255.255",
	"192.169.0.0",
	"198.17.255.255",
	"198.20.0.0",
	"198.51.99.255",
	"198.51.101.0",
	"203.0.112.255",
	"203.0.114.0",
	"223.255.255.255",
	"2606:4700:4700::1111",
	"2001:200::1",
	"2001:db7:ffff::1",
	"2001:db9::1",
	"2003::1",
	"64:ff9b::808:808", // 8.8.8.8 behind NAT64
	"2002:808:808::1",  // 8.8.8.8 in 6to4
	"3ffe:ffff::1",     // just under 3fff::/20
	"3fff:1000::1",     // just over 3fff::/20
	"4000::1",          // global unicast
	"fbff:ffff::1",     // just under fc00::/7
	"64:ff9a:ffff::1",  // just under the NAT64 prefixes
	"100:0:0:2::1",     // just over 100:0:0:1::/64
	"5eff:ffff::1",     // just under 5f00::/16
	"5f01::1",          // just over 5f00::/16
}

func bracket(a string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]"
	}
	return a
}

// TestGuardRefusesSpecialPurpose checks every range and encoding twice: as
// the literal host of the URL, and as the answer of a name's lookup.
func TestGuardRefusesSpecialPurpose(t *testing.T) {
	answers := map[string][][]string{}
	for i, tc := range specialPurpose {
		answers[name(i)] = [][]string{{tc.addr}}
	}
	g := push.NewGuard(nil, push.WithResolver(newResolver(answers)))
	for i, tc := range specialPurpose {
		t.Run(tc.addr, func(t *testing.T) {
			for _, u := range []string{"https://" + bracket(tc.addr) + ":8443/hook", "https://" + name(i) + "/hook"} {
				err := g.CheckURL(t.Context(), u)
				if strings.HasPrefix(tc.addr, "::ffff:") && !strings.Contains(u, "[") {
					// A lookup's answer cannot tell an A record from an
					// IPv4-mapped AAAA one (net.IP holds both in 16 bytes): the
					// embedded address is what decides.
					if !strings.Contains(tc.why, "mapped") && (!errors.Is(err, push.ErrTargetRefused) || !strings.Contains(err.Error(), tc.why)) {
						t.Errorf("%s: got %v, want a refusal saying %q", u, err, tc.why)
					}
					continue
				}
				if !errors.Is(err, push.ErrTargetRefused) || !strings.Contains(err.Error(), tc.why) {
					t.Errorf("%s: got %v, want a refusal saying %q", u, err, tc.why)
				}
			}
		})
	}
}

func TestGuardAcceptsPublicEdges(t *testing.T) {
	answers := map[string][][]string{}
	for i, a := range publicEdges {
		answers[name(i)] = [][]string{{a}}
	}
	g := push.NewGuard(nil, push.WithResolver(newResolver(answers)))
	for i, a := range publicEdges {
		for _, u := range []string{"https://" + bracket(a) + "/hook", "https://" + name(i) + "/hook"} {
			if err := g.CheckURL(t.Context(), u); err != nil {
				t.Errorf("%s (%s): refused: %v", u, a, err)
			}
		}
	}
}

// The allow-list allows an address and its IPv4-mapped form (the same
// address to the kernel), not the forms that reach another machine with
// it: an allowed 127.0.0.1 does not allow 6to4 2002:7f00:1:: or NAT64
// 64:ff9b::7f00:1.
func TestGuardAllowListAndEmbeddedForms(t *testing.T) {
	g := push.NewGuard([]string{"192.0.2.0/24", "127.0.0.1", "2001:db8::/32"}, push.WithResolver(newResolver(nil)))
	for _, a := range []string{"192.0.2.2", "::ffff:192.0.2.2", "127.0.0.1", "::ffff:127.0.0.1", "2001:db8::1"} {
		if err := g.CheckURL(t.Context(), "https://"+bracket(a)+"/"); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []string{"64:ff9b::c000:202", "2002:c000:202::1", "2002:7f00:1::", "64:ff9b::7f00:1", "::127.0.0.1", "198.18.0.1"} {
		if err := g.CheckURL(t.Context(), "https://"+bracket(a)+"/"); !errors.Is(err, push.ErrTargetRefused) {
			t.Errorf("%s: %v, want ErrTargetRefused", a, err)
		}
	}
}

// name is the host name the fake resolver answers the i-th address for.
func name(i int) string { return "host-" + strconv.Itoa(i) + ".test" }

// TestClientRefusesSpecialPurposeBeforeConnecting listens on 192.0.2.2, an
// address of this machine (a documentation range, routed locally here), and
// on loopback, and checks that no form of a refused address reaches either:
// the guard refuses before it dials. Where 192.0.2.2 is not local the
// loopback listener stands in for it.
func TestClientRefusesSpecialPurposeBeforeConnecting(t *testing.T) {
	port := trapOn(t, "192.0.2.2")
	client := push.NewGuard(nil, push.WithResolver(newResolver(map[string][][]string{
		"doc.test": {{"192.0.2.2"}},
	}))).Client(testTimeout)
	for _, host := range []string{"192.0.2.2", "[::ffff:192.0.2.2]", "[::192.0.2.2]", "[64:ff9b::c000:202]", "[2002:c000:202::]", "doc.test", "198.18.0.1", "192.0.0.8"} {
		resp, err := client.Post("https://"+host+":"+port+"/hook", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: delivered", host)
			continue
		}
		if !errors.Is(err, push.ErrTargetRefused) {
			t.Errorf("%s: got %v, want ErrTargetRefused", host, err)
		}
	}
}

// trapOn is trap on addr, or on loopback when addr is not this machine's.
func trapOn(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Logf("%s is not local here (%v): the trap listens on loopback", addr, err)
		return trap(t)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Errorf("the guard let a connection reach %s", ln.Addr())
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
