package handoff

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/a2ahttp"
	"github.com/handoff-a2a/handoff/internal/auth"
)

// limitsKey is the API key of the limits tests' authenticated caller.
const limitsKey = "limits-s3cret"

// startLimitsAgent serves an agent whose config is minimal plus extra (YAML
// lines: a server section, limits, auth) and returns its host:port.
func startLimitsAgent(t *testing.T, extra string) string {
	t.Helper()
	c, err := ParseConfig("limits.yaml", strings.NewReader("name: A\ndescription: B\nskills: [{id: s, name: S, executor: tck}]\n"+
		"log: {level: error}\n"+extra))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	return strings.TrimPrefix(startAgent(t, c), "http://")
}

// keyAuth is the auth section with the limits tests' API key.
func keyAuth() string {
	return fmt.Sprintf("auth: {api_keys: [{name: caller, sha256: %s}]}\n", auth.HashAPIKey(limitsKey))
}

// rawConn is one client connection driven by hand, so a test controls what
// is sent, when, and on which connection.
type rawConn struct {
	t *testing.T
	net.Conn
	br *bufio.Reader
}

// dial opens a connection; every read and write on it gives up after 5s,
// so a server that never answers fails the test instead of hanging it.
func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &rawConn{t: t, Conn: c, br: bufio.NewReader(c)}
}

// send writes s as it is.
func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.Conn, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// response reads one response and its body.
func (c *rawConn) response() (*http.Response, string, error) {
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// mustResponse is response, failing the test on an error.
func (c *rawConn) mustResponse(what string) (*http.Response, string) {
	c.t.Helper()
	resp, body, err := c.response()
	if err != nil {
		c.t.Fatalf("%s: no response: %v", what, err)
	}
	return resp, body
}

// healthz sends GET /healthz on c and requires 200.
func (c *rawConn) healthz() {
	c.t.Helper()
	c.send("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
	if resp, body := c.mustResponse("GET /healthz"); resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /healthz = %d %q", resp.StatusCode, body)
	}
}

// listTasks sends an authenticated JSON-RPC ListTasks on c and requires an answer.
func (c *rawConn) listTasks() {
	c.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nX-API-Key: %s\r\nContent-Length: %d\r\n\r\n%s",
		pathJSONRPC, limitsKey, len(body), body))
	if resp, b := c.mustResponse("ListTasks"); resp.StatusCode != http.StatusOK || !strings.Contains(b, `"result"`) {
		c.t.Fatalf("ListTasks = %d %q", resp.StatusCode, b)
	}
}

// closedByServer reports whether the server closed c: a read ends with EOF
// (or a reset) before its deadline.
func (c *rawConn) closedByServer(within time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(within))
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// answered reports, without waiting, whether the server has answered or
// closed c.
func (c *rawConn) answered() bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.Peek(1)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// postHead sends the headers of a POST whose body is length bytes long, and
// the first byte of that body only.
func (c *rawConn) postHead(length int, headers string) {
	c.t.Helper()
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n{", pathJSONRPC, headers, length))
}

// pollStatus sends the request try makes on fresh connections until one is
// answered with want, and fails the test when none is within 10s.
func pollStatus(t *testing.T, addr string, want int, what string, try func(*rawConn)) *http.Response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for {
		c := dial(t, addr)
		try(c)
		resp, body, err := c.response()
		if err == nil && resp.StatusCode == want {
			c.Close()
			return resp
		}
		last = fmt.Sprintf("%v %q", err, body)
		if resp != nil {
			last = fmt.Sprintf("%d %q", resp.StatusCode, body)
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %d within 10s; last answer: %s", what, want, last)
		}
		time.Sleep(20 * time.Millisecond) // polling: the server registers the connections that fill it as it reads them
	}
}

// TestUnauthenticatedBodyIsNotRead: a request without credentials is
// refused on its headers, without waiting for (or buffering) its body.
func TestUnauthenticatedBodyIsNotRead(t *testing.T) {
	addr := startLimitsAgent(t, keyAuth())
	c := dial(t, addr)
	c.postHead(4_000_000, "")
	resp, body := c.mustResponse("a 4 MB POST without credentials, 1 byte of its body sent")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d %q, want 401", resp.StatusCode, body)
	}
	if !c.closedByServer(2 * time.Second) {
		t.Fatal("the connection stayed open after refusing a request whose body was not read")
	}
}

// TestSlowBodyTimesOut: a body that does not arrive within read_timeout is
// answered 408 and its connection closed.
func TestSlowBodyTimesOut(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: {read_timeout: 300ms}\n")
	c := dial(t, addr)
	c.postHead(1000, "")
	resp, body := c.mustResponse("a POST whose body stops after 1 byte")
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d %q, want 408", resp.StatusCode, body)
	}
	if !c.closedByServer(2 * time.Second) {
		t.Fatal("the connection stayed open after its body timed out")
	}
}

// TestInflightBodyBudget: the bodies held at once are bounded across all
// requests; past the budget a request is refused with 503 and Retry-After,
// and served again once the budget is free.
func TestInflightBodyBudget(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nlimits: {max_body_bytes: 32768}\nserver: {max_inflight_body_bytes: 65536}\n")
	holder := func() *rawConn {
		c := dial(t, addr)
		c.postHead(32768, "") // holds 32 KiB of the budget while its body trickles
		return c
	}
	holders := []*rawConn{holder(), holder()}
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	post := func(c *rawConn) {
		c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			pathJSONRPC, len(body), body))
	}
	t.Cleanup(func() {
		if t.Failed() { // what the holders were told, if anything
			for i, c := range holders {
				_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
				resp, body, err := c.response()
				if resp != nil {
					t.Logf("holder %d was answered %d %q", i, resp.StatusCode, body)
				} else {
					t.Logf("holder %d: no answer (%v)", i, err)
				}
			}
		}
	})
	resp := pollStatus(t, addr, http.StatusServiceUnavailable, "a small POST while the budget is held", func(c *rawConn) {
		// A holder that arrived while a probe held its few bytes was
		// refused itself: it is replaced, so two hold the budget in the end.
		for i, h := range holders {
			if h.answered() {
				holders[i] = holder()
			}
		}
		post(c)
	})
	if resp.Header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", resp.Header)
	}
	for _, c := range holders {
		c.Close()
	}
	pollStatus(t, addr, http.StatusOK, "a small POST once the budget is free", post)
}

// TestIdleTimeout: a keep-alive connection that carries nothing is closed
// after idle_timeout.
func TestIdleTimeout(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: {idle_timeout: 200ms}\n")
	c := dial(t, addr)
	c.healthz()
	if !c.closedByServer(3 * time.Second) {
		t.Fatal("an idle keep-alive connection was still open 3s after idle_timeout (200ms)")
	}
}

// TestConnectionCapEvictsIdle: at max_connections, new connections close
// the connections idle longest (past a2ahttp.SpareGrace), and a connection that
// carried an authenticated request outlives the idle ones that never did.
func TestConnectionCapEvictsIdle(t *testing.T) {
	addr := startLimitsAgent(t, keyAuth()+"server: {max_connections: 16, max_connections_per_ip: 0}\n")
	trusted := dial(t, addr)
	trusted.listTasks()
	var idle []*rawConn
	for range 15 { // the server is full
		c := dial(t, addr)
		c.healthz()
		idle = append(idle, c)
	}
	time.Sleep(2 * a2ahttp.SpareGrace)
	var fresh []*rawConn
	for range 15 {
		c := dial(t, addr)
		c.healthz() // each new connection is served: room is made for it
		fresh = append(fresh, c)
	}
	closed := 0
	for _, c := range idle {
		if c.closedByServer(50 * time.Millisecond) {
			closed++
		}
	}
	if closed != 15 {
		t.Fatalf("%d of the 15 connections idle longest closed by the server, want 15 (max_connections 16)", closed)
	}
	for _, c := range fresh {
		if c.closedByServer(10 * time.Millisecond) {
			t.Fatal("a connection that carried its request just now was closed")
		}
	}
	_ = trusted.SetDeadline(time.Now().Add(5 * time.Second))
	trusted.listTasks() // still served on its own connection
}

// TestConnectionCapRefusesWhenBusy: when every connection is busy, at the
// server's cap or at one address's, a new connection is answered 503 with
// Retry-After and closed.
func TestConnectionCapRefusesWhenBusy(t *testing.T) {
	for _, tc := range []struct {
		name, server string
		busy         int
	}{
		{"server cap", "{max_connections: 16, max_connections_per_ip: 0}", 16},
		{"per address", "{max_connections: 64, max_connections_per_ip: 16}", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: "+tc.server+"\n")
			for range tc.busy {
				dial(t, addr).postHead(1000, "") // busy: its body is being read
			}
			// A connection the server has not read yet is spare, and a later
			// one may close it: one more busy connection before each try
			// fills the room that made.
			resp := pollStatus(t, addr, http.StatusServiceUnavailable, "GET /healthz with every connection busy",
				func(c *rawConn) {
					dial(t, addr).postHead(1000, "")
					c.send("GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n")
				})
			if resp.Header.Get("Retry-After") == "" {
				t.Fatalf("503 without Retry-After: %v", resp.Header)
			}
		})
	}
}

// TestStreamOutlivesTimeouts: an SSE stream is not cut by read_timeout,
// idle_timeout or the write stall timeout (it bounds each write, not the
// stream): it lasts as long as its task, here until it is canceled.
func TestStreamOutlivesTimeouts(t *testing.T) {
	lowerWriteStall(t, 200*time.Millisecond)
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: {read_timeout: 200ms, idle_timeout: 200ms}\n")
	c := dial(t, addr)
	body := `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"test-resubscribe-message-id-limits","role":"ROLE_USER","parts":[{"text":"wait"}]}}}`
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", pathJSONRPC, len(body), body))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", resp, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	lines := make(chan string, 64)
	go func() { // the stream's lines, until it ends
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var taskID string
	for taskID == "" {
		line, ok := <-lines
		if !ok {
			t.Fatal("the stream ended before its first event")
		}
		if _, rest, ok := strings.Cut(line, `"taskId":"`); ok {
			taskID, _, _ = strings.Cut(rest, `"`)
		} else if _, rest, ok := strings.Cut(line, `"task":{"id":"`); ok {
			taskID, _, _ = strings.Cut(rest, `"`)
		}
	}
	// Past both timeouts, the stream is still open.
	past := time.After(time.Second)
	for waiting := true; waiting; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended within 1s (timeouts 200ms)")
			}
			if strings.Contains(line, "TASK_STATE_COMPLETED") {
				t.Fatalf("the task completed before it was canceled: %s", line)
			}
		case <-past:
			waiting = false
		}
	}
	cancel := dial(t, addr)
	cb := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"CancelTask","params":{"id":%q}}`, taskID)
	cancel.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", pathJSONRPC, len(cb), cb))
	cancel.mustResponse("CancelTask")
	for line := range lines {
		if strings.Contains(line, "TASK_STATE_CANCELED") {
			return
		}
	}
	t.Fatal("the stream ended without the canceled event")
}
