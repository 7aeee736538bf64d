package handoff

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/handoff-a2a/handoff/internal/a2ahttp"
)

// lowerWriteStall makes a stalled response write give up after d for the
// agents the test starts.
func lowerWriteStall(t *testing.T, d time.Duration) {
	old := writeStallTimeout
	writeStallTimeout = d
	t.Cleanup(func() { writeStallTimeout = old })
}

// authenticatedServedWithin fails the test unless an authenticated ListTasks
// on a new connection is answered 200 within d.
func authenticatedServedWithin(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	start := time.Now()
	last := "nothing"
	for time.Since(start) < d {
		c := dial(t, addr)
		body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
		c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nX-API-Key: %s\r\nContent-Length: %d\r\n\r\n%s",
			pathJSONRPC, limitsKey, len(body), body))
		resp, b, err := c.response()
		c.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%v %q", err, b)
		if resp != nil {
			last = fmt.Sprintf("%d %q", resp.StatusCode, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("an authenticated caller was not served within %s; last answer: %s", d, last)
}

// TestStalledWritesEnd: unauthenticated HTTP/1 clients that pipeline
// requests for the public card and never read the answers hold their
// connections only until a write has made no progress for the stall
// timeout; then authenticated callers are served again.
func TestStalledWritesEnd(t *testing.T) {
	lowerWriteStall(t, 500*time.Millisecond)
	addr := startLimitsAgent(t, keyAuth()+"server: {max_connections: 16, max_connections_per_ip: 0, read_header_timeout: 500ms, read_timeout: 500ms, idle_timeout: 500ms}\n")
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
	}}
	burst := strings.Repeat("GET /.well-known/agent-card.json HTTP/1.1\r\nHost: agent\r\n\r\n", 4000)
	for range 16 {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		go func() { _ = c.SetWriteDeadline(time.Now().Add(time.Minute)); _, _ = c.Write([]byte(burst)) }()
	}
	time.Sleep(time.Second)
	authenticatedServedWithin(t, addr, 8*time.Second)
}

// TestH2CStalledStreamsEnd: unauthenticated h2c clients that grant no flow
// control window (SETTINGS_INITIAL_WINDOW_SIZE=0) and open many streams get
// at most the server's stream cap each, and those streams end after the
// stall timeout; then authenticated callers are served again.
func TestH2CStalledStreamsEnd(t *testing.T) {
	lowerWriteStall(t, 500*time.Millisecond)
	addr := startLimitsAgent(t, keyAuth()+"server: {max_connections: 16, max_connections_per_ip: 0, read_header_timeout: 500ms, read_timeout: 500ms, idle_timeout: 500ms}\n")
	for i := range 16 {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		fr := http2.NewFramer(c, c)
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		if i == 0 { // the server's settings: its stream cap
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			sf, ok := f.(*http2.SettingsFrame)
			if !ok {
				t.Fatalf("first frame %T, want SETTINGS", f)
			}
			if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v > 100 {
				t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (set: %v), want at most 100", v, ok)
			}
		}
		go func() { _, _ = c.Read(make([]byte, 1)) }() // never really read
		for s := uint32(1); s < 2*100; s += 2 {
			hb.Reset()
			_ = enc.WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
			_ = enc.WriteField(hpack.HeaderField{Name: ":scheme", Value: "http"})
			_ = enc.WriteField(hpack.HeaderField{Name: ":authority", Value: "agent"})
			_ = enc.WriteField(hpack.HeaderField{Name: ":path", Value: "/.well-known/agent-card.json"})
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
				break // the server may end the connection for streams over its cap
			}
		}
	}
	time.Sleep(time.Second)
	authenticatedServedWithin(t, addr, 8*time.Second)
}

// TestUnreadBodyDoesNotPinConnection: an unauthenticated request that
// announces a body it never sends, on a route that reads no body, is
// answered at once and its connection closed within about a2ahttp.RefusalDrain,
// not after read_header_timeout + read_timeout.
func TestUnreadBodyDoesNotPinConnection(t *testing.T) {
	addr := startLimitsAgent(t, keyAuth()+"mcp_server: {enabled: true}\n")
	for _, path := range []string{"GET /healthz", "GET /.well-known/agent-card.json", "GET /nowhere", "DELETE /healthz", "POST /mcp"} {
		t.Run(path, func(t *testing.T) {
			c := dial(t, addr)
			method, p, _ := strings.Cut(path, " ")
			c.send(method + " " + p + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n")
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, _, err := c.response()
			if err != nil {
				t.Fatalf("no answer within 3s: %v", err)
			}
			if !resp.Close {
				t.Errorf("%d without Connection: close: %v", resp.StatusCode, resp.Header)
			}
			if !c.closedByServer(a2ahttp.RefusalDrain + 2*time.Second) {
				t.Fatalf("the connection was still open %s after the answer", a2ahttp.RefusalDrain+2*time.Second)
			}
		})
	}
}

// TestH2CRefusalKeepsConnection: on h2c, a refused request with a body does
// not end the connection other callers share with it.
func TestH2CRefusalKeepsConnection(t *testing.T) {
	addr := startLimitsAgent(t, keyAuth()+"limits: {max_body_bytes: 65536}\n")
	var mu sync.Mutex
	dials := 0
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
		mu.Lock()
		dials++
		mu.Unlock()
		return net.Dial(network, a)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	do := func(key, body string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+pathJSONRPC, strings.NewReader(body))
		req.Header.Set("A2A-Version", "1.0")
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	for range 3 {
		if got := do(limitsKey, list); got != http.StatusOK {
			t.Fatalf("authenticated ListTasks = %d", got)
		}
		if got := do("", list); got != http.StatusUnauthorized {
			t.Fatalf("unauthenticated ListTasks = %d", got)
		}
		if got := do(limitsKey, strings.Repeat(" ", 70000)+list); got != http.StatusRequestEntityTooLarge {
			t.Fatalf("oversized ListTasks = %d", got)
		}
	}
	if dials != 1 {
		t.Fatalf("%d connections dialed for 9 requests, want 1: a refusal ended the shared connection", dials)
	}
}

// TestBudgetGivenBackWhenStreamStarts: a stream's body counts against
// max_inflight_body_bytes until its answer starts, not for the stream's
// whole life.
func TestBudgetGivenBackWhenStreamStarts(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nlimits: {max_body_bytes: 32768}\nserver: {max_inflight_body_bytes: 65536}\n")
	for i := range 2 {
		c := dial(t, addr)
		pad := strings.Repeat("x", 30000)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"test-resubscribe-message-id-g%d","role":"ROLE_USER","parts":[{"text":"wait"}],"metadata":{"pad":%q}}}}`, i, pad)
		c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", pathJSONRPC, len(body), body))
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("stream %d: %v %v", i, resp, err)
		}
	}
	c := dial(t, addr)
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}` + strings.Repeat(" ", 6000)
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", pathJSONRPC, len(body), body))
	if resp, b := c.mustResponse("ListTasks"); resp.StatusCode != http.StatusOK {
		t.Fatalf("a 6 KB ListTasks while two 30 KB streams run (budget 64 KiB): %d %q", resp.StatusCode, b)
	}
}

// TestWriteDeadlineNotLeftOnIdleConnection: the write deadline armed for a
// response does not outlive it: on a keep-alive connection idle for longer
// than the stall timeout, what net/http writes itself (a 100 Continue, a
// 400 for a malformed request) still gets through.
func TestWriteDeadlineNotLeftOnIdleConnection(t *testing.T) {
	lowerWriteStall(t, 200*time.Millisecond)
	addr := startLimitsAgent(t, keyAuth())
	c := dial(t, addr)
	c.healthz()
	time.Sleep(500 * time.Millisecond)
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`
	c.send(fmt.Sprintf("POST %s HTTP/1.1\r\nHost: agent\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nX-API-Key: %s\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n",
		pathJSONRPC, limitsKey, len(body)))
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != http.StatusContinue {
		t.Fatalf("no 100 Continue on a connection idle past the stall timeout: %v %v", resp, err)
	}
	c.send(body)
	if resp, b := c.mustResponse("ListTasks"); resp.StatusCode != http.StatusOK {
		t.Fatalf("ListTasks = %d %q", resp.StatusCode, b)
	}
	time.Sleep(500 * time.Millisecond)
	c.send("GET /healthz HTTP/1.1\r\nHost: agent\r\nBad Header\r\n\r\n")
	if resp, b := c.mustResponse("a malformed request"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a malformed request = %d %q", resp.StatusCode, b)
	}
}

// TestH2CStreamOutlivesStallTimeout: on h2c too, a quiet SSE stream is not
// cut by the write stall timeout, which bounds each write, not the stream.
func TestH2CStreamOutlivesStallTimeout(t *testing.T) {
	lowerWriteStall(t, 200*time.Millisecond)
	addr := startLimitsAgent(t, "auth: {anonymous: true}\n")
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
		return net.Dial(network, a)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	post := func(body string) *http.Response {
		req, _ := http.NewRequest("POST", "http://"+addr+pathJSONRPC, strings.NewReader(body))
		req.Header.Set("A2A-Version", "1.0")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"test-resubscribe-message-id-h2","role":"ROLE_USER","parts":[{"text":"wait"}]}}}`)
	defer resp.Body.Close()
	lines := make(chan string, 64)
	go func() {
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
	time.Sleep(time.Second) // quiet, five stall timeouts long
	post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"CancelTask","params":{"id":%q}}`, taskID)).Body.Close()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended without the canceled event")
			}
			if strings.Contains(line, "TASK_STATE_CANCELED") {
				return
			}
		case <-timeout:
			t.Fatal("no canceled event within 5s")
		}
	}
}
