package a2ahttp

import (
	"log/slog"
	"net"
	"strings"
	"testing"
)

// fakeListener hands out in-memory connections with the remote addresses
// the test names.
type fakeListener struct{ conns chan net.Conn }

func (l fakeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (fakeListener) Close() error   { return nil }
func (fakeListener) Addr() net.Addr { return &net.TCPAddr{} }

type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// TestConnectionCapClientKeys: the per-address cap counts an IPv6 client by
// its /64 and an IPv4-mapped address as its IPv4 one.
func TestConnectionCapClientKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		same bool
	}{
		{"one /64", "[2001:db8:1:2::1]:1000", "[2001:db8:1:2:ffff::9]:1000", true},
		{"two /64s", "[2001:db8:1:2::1]:1000", "[2001:db8:1:3::1]:1000", false},
		{"IPv4-mapped", "[::ffff:192.0.2.7]:1000", "192.0.2.7:2000", true},
		{"two IPv4", "192.0.2.7:1000", "192.0.2.8:1000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conns := make(chan net.Conn, 2)
			l := newConnLimiter(fakeListener{conns}, 16, 16, nil)
			var got []string
			for _, a := range []string{tc.a, tc.b} {
				ap, err := net.ResolveTCPAddr("tcp", a)
				if err != nil {
					t.Fatal(err)
				}
				c, _ := net.Pipe()
				conns <- addrConn{Conn: c, remote: ap}
				lc, err := l.Accept()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, lc.(*limitedConn).ip)
			}
			if (got[0] == got[1]) != tc.same {
				t.Fatalf("keys %q and %q: same = %v, want %v", got[0], got[1], got[0] == got[1], tc.same)
			}
		})
	}
}

// TestPerIPBehindProxyLogged: with the per-address cap on and an https
// public URL (a reverse proxy, likely), the agent says at start how to
// turn the cap off; not otherwise.
func TestPerIPBehindProxyLogged(t *testing.T) {
	for _, tc := range []struct {
		perIP int
		url   string
		want  bool
	}{{512, "https://agent.example", true}, {0, "https://agent.example", false}, {512, "http://127.0.0.1:8080", false}, {512, "", false}} {
		var buf strings.Builder
		WarnPerIPBehindProxy(slog.New(slog.NewTextHandler(&buf, nil)), tc.perIP, tc.url)
		if got := strings.Contains(buf.String(), "max_connections_per_ip: 0"); got != tc.want {
			t.Errorf("per-IP %d, public_url %q: logged %v, want %v: %q", tc.perIP, tc.url, got, tc.want, buf.String())
		}
	}
}
