package handoff

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/a2ahttp"
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

// TestConnectionCapRefusalGoClient: with every connection busy, a Go client
// (a2a-go's, or a Go reverse proxy's) reads the refusal as a 503, never as
// a broken connection: the refusal is written after the request's head is
// read, not before.
func TestConnectionCapRefusalGoClient(t *testing.T) {
	addr := startLimitsAgent(t, "auth: {anonymous: true}\nserver: {max_connections: 16, max_connections_per_ip: 0}\n")
	for range 16 {
		dial(t, addr).postHead(1000, "")
	}
	time.Sleep(2 * a2ahttp.SpareGrace) // none is spare: all are reading a body
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
