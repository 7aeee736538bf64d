package a2ahttp

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// TestConnectionCapFloodLeavesRoom: a flood of unauthenticated clients that
// redial as soon as they are closed, far faster than max/SpareGrace, over
// real sockets, against a full table: a new connection of another caller
// still gets in (it displaces an idle flood connection that had its
// answer) and is never told 503, and the table never holds more than max.
func TestConnectionCapFloodLeavesRoom(t *testing.T) {
	const (
		maxConns = 32
		flooders = 64
		calls    = 40
		redial   = 50 * time.Millisecond // after a close: max/SpareGrace is 128/s, the flood's aim 1,280/s
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(ln, maxConns, 0, slog.New(slog.DiscardHandler))
	var over atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		over.CompareAndSwap(false, l.total > maxConns)
		l.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		markAuthenticated(r.Context())
		_, _ = io.WriteString(w, "ok")
	})
	srv := &http.Server{Handler: mux, ConnState: l.ConnState, ConnContext: l.ConnContext}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	// Each flooder: dial, one /healthz, then idle until the server closes
	// the connection, and again shortly after.
	ctx, stop := context.WithCancel(t.Context())
	var flood sync.WaitGroup
	var dialed atomic.Int64
	for range flooders {
		flood.Go(func() {
			for ctx.Err() == nil {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				dialed.Add(1)
				stopWatch := context.AfterFunc(ctx, func() { _ = c.Close() })
				_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: flood\r\n\r\n")
				_, _ = io.Copy(io.Discard, c) // the answer, then idle until closed
				stopWatch()
				_ = c.Close()
				select {
				case <-ctx.Done():
				case <-time.After(redial):
				}
			}
		})
	}
	defer func() { stop(); flood.Wait() }()

	// Fill the table before the caller starts.
	for dialed.Load() < 4*maxConns {
		time.Sleep(time.Millisecond)
	}
	start, before := time.Now(), dialed.Load()
	refused := 0
	for range calls {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET /auth HTTP/1.1\r\nHost: caller\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err != nil:
			t.Errorf("the caller's request: %v", err)
		case resp.StatusCode == http.StatusServiceUnavailable:
			refused++
		case resp.StatusCode != http.StatusOK:
			t.Errorf("the caller's request: %s", resp.Status)
		}
		_ = c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	rate := float64(dialed.Load()-before) / time.Since(start).Seconds()
	t.Logf("flood: %.0f connections/s (max/SpareGrace = %.0f/s); caller refused %d of %d", rate, maxConns/SpareGrace.Seconds(), refused, calls)
	if rate < 2*maxConns/SpareGrace.Seconds() {
		t.Fatalf("the flood redialed %.0f connections/s, under twice max/SpareGrace: it does not test the case", rate)
	}
	if refused > 0 {
		t.Errorf("the caller was told 503 %d times of %d while the table held idle, answered flood connections", refused, calls)
	}
	if over.Load() {
		t.Errorf("the table held more than %d connections", maxConns)
	}
}
