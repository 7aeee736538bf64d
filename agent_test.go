package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/agentcard"
)

func testConfig(t testing.TB) *Config {
	t.Helper()
	c, err := ParseConfig("test.yaml", strings.NewReader(minimalConfig+"limits: {max_body_bytes: 4096, shutdown_grace: 1s}\nlog: {level: error}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	return c
}

// startAgent serves a real agent on a loopback port until the test ends.
func startAgent(t *testing.T, c *Config) string {
	t.Helper()
	_, url := serveAgent(t, c)
	return url
}

// serveAgent serves a real agent made with opts on a loopback port until the
// test ends, and returns it with its URL.
func serveAgent(t *testing.T, c *Config, opts ...Option) (*Agent, string) {
	t.Helper()
	a, err := New(t.Context(), c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	var once sync.Once
	shutdown := func() {
		once.Do(func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(shutdown)
	url := "http://" + ln.Addr().String()
	stops.mu.Lock()
	if stops.byURL == nil {
		stops.byURL = map[string]func(){}
	}
	stops.byURL[url] = shutdown
	stops.mu.Unlock()
	return a, url
}

func postJSONRPC(t *testing.T, url, version, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp := openJSONRPC(t, t.Context(), url, version, body)
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("response is not JSON: %q", b)
	}
	return resp, out
}

// openJSONRPC posts a JSON-RPC request to the agent at url, with the
// A2A-Version header unless version is empty, and returns the response
// unread.
func openJSONRPC(t *testing.T, ctx context.Context, url, version, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+pathJSONRPC, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func TestVersionRouting(t *testing.T) {
	url := startAgent(t, testConfig(t))
	send := `{"jsonrpc":"2.0","id":7,"method":"%s","params":{"message":{"messageId":"m1","role":"%s","parts":[%s]}}}`
	// 1.0: method SendMessage, role ROLE_USER, parts {text}.
	_, out := postJSONRPC(t, url, "1.0", fmtSend(send, "SendMessage", "ROLE_USER", `{"text":"hi"}`))
	if out["result"] == nil {
		t.Fatalf("1.0 send: %v", out)
	}
	// 0.3: method message/send, role user, parts {kind:text}.
	_, out = postJSONRPC(t, url, "", fmtSend(send, "message/send", "user", `{"kind":"text","text":"hi"}`))
	if r, _ := out["result"].(map[string]any); r == nil || r["kind"] != "task" {
		t.Fatalf("0.3 send: %v", out)
	}
	_, out = postJSONRPC(t, url, "9.9", fmtSend(send, "SendMessage", "ROLE_USER", `{"text":"hi"}`))
	if errorCode(out) != -32009 || out["id"] != 7.0 {
		t.Fatalf("unsupported version: %v", out)
	}
}

func fmtSend(format, method, role, part string) string {
	return fmt.Sprintf(format, method, role, part)
}

func TestBodyLimit(t *testing.T) {
	url := startAgent(t, testConfig(t))
	big := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` +
		strings.Repeat("x", 5000) + `"}]}}}`
	resp, out := postJSONRPC(t, url, "1.0", big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || errorCode(out) != -32600 {
		t.Fatalf("status %d, body %v", resp.StatusCode, out)
	}
	if msg := out["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "4096") {
		t.Fatalf("message does not name the limit: %q", msg)
	}
}

func TestRESTStreamErrorIsHTTPError(t *testing.T) {
	url := startAgent(t, testConfig(t))
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url+pathREST+"/tasks/nope:subscribe", nil)
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, type %q, body %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil || out["error"] == nil {
		t.Fatalf("body %s", b)
	}
}

// FuzzJSONRPCRequest sends arbitrary bodies to the JSON-RPC endpoint, in
// both protocol versions: the agent must answer every one with JSON (or an
// SSE stream), never panic and never a 5xx.
func FuzzJSONRPCRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"x","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"nope","historyLength":-1}}`,
		`{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":{"pageSize":1000}}`,
		`{"jsonrpc":"2.0","id":3,"method":"CancelTask","params":{}}`,
		`{"jsonrpc":"2.0","id":4,"method":"SendStreamingMessage","params":{"message":{"messageId":"tck-stream-002","role":"ROLE_USER","parts":[{"text":"s"}]}}}`,
		`{"jsonrpc":"2.0","method":"nope"}`,
		`[1,2]`, `{`, `null`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	c := testConfig(f)
	a, err := New(context.Background(), c)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a.engine.Shutdown(ctx)
		a.Close()
	})
	h, err := a.Handler("http://127.0.0.1:1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, v10 bool) {
		if bytes.Contains(body, []byte("test-resubscribe")) {
			return // waits 10 s by design
		}
		req := httptest.NewRequest("POST", pathJSONRPC, bytes.NewReader(body))
		if v10 {
			req.Header.Set("A2A-Version", "1.0")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.Bytes())
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			return
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON for %q: %q", body, rec.Body.Bytes())
		}
	})
}

func TestCardUsesPublicURL(t *testing.T) {
	c := testConfig(t)
	c.PublicURL = "https://agents.example.com/handoff/"
	url := startAgent(t, c)
	resp, err := http.Get(url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card struct {
		URL                 string `json:"url"`
		SupportedInterfaces []struct {
			URL, ProtocolBinding, ProtocolVersion string
		} `json:"supportedInterfaces"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"JSONRPC 1.0": "https://agents.example.com/handoff/a2a/jsonrpc", "HTTP+JSON 1.0": "https://agents.example.com/handoff/a2a/rest",
		"GRPC 1.0": "https://agents.example.com/handoff", "JSONRPC 0.3": "https://agents.example.com/handoff/a2a/jsonrpc",
		"HTTP+JSON 0.3": "https://agents.example.com/handoff/a2a/rest",
	}
	for _, i := range card.SupportedInterfaces {
		key := i.ProtocolBinding + " " + i.ProtocolVersion
		if want[key] != i.URL {
			t.Errorf("%s at %q, want %q", key, i.URL, want[key])
		}
		delete(want, key)
	}
	if len(want) != 0 || card.URL != "https://agents.example.com/handoff/a2a/jsonrpc" {
		t.Fatalf("missing %v; 0.3 url %q", want, card.URL)
	}
}

func TestCardCaching(t *testing.T) {
	url := startAgent(t, testConfig(t))
	resp, err := http.Get(url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age") {
		t.Fatalf("headers: %v", resp.Header)
	}
	req, _ := http.NewRequest("GET", url+"/.well-known/agent-card.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: status %d", resp.StatusCode)
	}
	req.Header.Set("If-None-Match", `"other"`)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stale etag: status %d", resp.StatusCode)
	}
}

func TestCardIsSignedAndKeyKept(t *testing.T) {
	c := testConfig(t)
	url := startAgent(t, c)
	verify := func(url string) string {
		resp, err := http.Get(url + "/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		card, err := agentcard.ParseCard(b)
		if err != nil {
			t.Fatal(err)
		}
		v, err := agentcard.NewVerifier(agentcard.TrustPolicy{JKUPrefixes: []string{url + "/.well-known/"}})
		if err != nil {
			t.Fatal(err)
		}
		kid, err := v.Verify(t.Context(), card)
		if err != nil {
			t.Fatalf("the served card does not verify: %v", err)
		}
		return kid
	}
	kid := verify(url)
	info, err := os.Stat(filepath.Join(c.DataDir, "signing-key.jwk"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", info, err)
	}
	// A restarted agent on the same data directory keeps its key.
	stopAgent(t, url)
	if got := verify(startAgent(t, c)); got != kid {
		t.Fatalf("restart changed the key: %s then %s", kid, got)
	}
}

// stopAgent stops the agent serving url now, instead of at the end of the test.
func stopAgent(t *testing.T, url string) {
	t.Helper()
	stops.mu.Lock()
	stop := stops.byURL[url]
	stops.mu.Unlock()
	if stop == nil {
		t.Fatalf("no agent at %s", url)
	}
	stop()
}

// stops lets a test stop an agent before its cleanup does.
var stops struct {
	mu    sync.Mutex
	byURL map[string]func()
}
