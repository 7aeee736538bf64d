package handoff

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestConnectionCapGoClients: Go clients over max_connections, each with
// its own connection, never lose a request: a connection just opened (its
// request maybe sent, not yet read) is not closed to make room, and a
// newcomer finding no spare connection is told 503.
func TestConnectionCapGoClients(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: {max_connections: 16, max_connections_per_ip: 0}\n")
	var mu sync.Mutex
	out := map[string]int{}
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for w := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for i := 0; time.Now().Before(deadline); i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-complete-task-g%d-%d","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, w, i)
				req, _ := http.NewRequest("POST", "http://"+addr+pathJSONRPC, strings.NewReader(body))
				req.Header.Set("A2A-Version", "1.0")
				resp, err := client.Do(req)
				k := ""
				if err != nil {
					k = "error"
					if _, e, ok := strings.Cut(err.Error(), ": "); ok {
						k += ": " + e[strings.LastIndex(e, ": ")+1:]
					}
				} else {
					k = resp.Status
					resp.Body.Close()
				}
				mu.Lock()
				out[k]++
				mu.Unlock()
				if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	lost := 0
	for k, v := range out {
		if strings.HasPrefix(k, "error") {
			lost += v
		}
	}
	t.Logf("answers: %v", out)
	if lost > 0 {
		t.Fatalf("%d requests failed without an answer", lost)
	}
}

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

// TestConnectionCapRefusalGoClient: with every connection busy, a Go client
// (a2a-go's, or a Go reverse proxy's) reads the refusal as a 503, never as
// a broken connection: the refusal is written after the request's head is
// read, not before.
func TestConnectionCapRefusalGoClient(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: {max_connections: 16, max_connections_per_ip: 0}\n")
	for range 16 {
		dial(t, addr).postHead(1000, "")
	}
	time.Sleep(2 * spareGrace) // none is spare: all are reading a body
	// A client that sends its request a moment after connecting (a Go
	// client reading a 503 that came before its request calls it an
	// unsolicited response and fails the request).
	c := dial(t, addr)
	time.Sleep(100 * time.Millisecond)
	if c.answered() {
		t.Fatal("the refusal was written before the request was sent")
	}
	c.send("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
	if resp, b := c.mustResponse("GET /healthz with every connection busy"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /healthz with every connection busy = %d %q", resp.StatusCode, b)
	}
	out := map[string]int{}
	for range 100 {
		tr := &http.Transport{}
		client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		req, _ := http.NewRequest("POST", "http://"+addr+pathJSONRPC, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
		req.Header.Set("A2A-Version", "1.0")
		resp, err := client.Do(req)
		tr.CloseIdleConnections()
		if err != nil {
			out["error: "+err.Error()[strings.LastIndex(err.Error(), ": ")+1:]]++
			continue
		}
		out[resp.Status]++
		resp.Body.Close()
	}
	if out["503 Service Unavailable"] != 100 {
		t.Fatalf("100 requests with every connection busy: %v, want 100 answered 503", out)
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
		warnPerIPBehindProxy(slog.New(slog.NewTextHandler(&buf, nil)), tc.perIP, tc.url)
		if got := strings.Contains(buf.String(), "max_connections_per_ip: 0"); got != tc.want {
			t.Errorf("per-IP %d, public_url %q: logged %v, want %v: %q", tc.perIP, tc.url, got, tc.want, buf.String())
		}
	}
}
