package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
)

// lineWriter hands each complete line written to it to a channel, so a test
// waits for output instead of polling it.
type lineWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 256)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// next returns the next line that contains want.
func (w *lineWriter) next(t *testing.T, want string) string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l := <-w.lines:
			if strings.Contains(l, want) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line with %q", want)
		}
	}
}

// startAgentKeys publishes a fresh key's JWKS where an agent does, and
// returns the agent's base URL and a signer with that key.
func startAgentKeys(t *testing.T) (string, *push.Signer) {
	t.Helper()
	key, err := agentcard.GenerateKey(jose.EdDSA, "k1")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := agentcard.NewKeySet(time.Hour, agentcard.Key{JWK: key})
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := ks.JWKS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) { w.Write(jwks) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, push.NewSigner(ks, srv.URL)
}

func postDelivery(t *testing.T, method, url string, h http.Header, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWebhookListen(t *testing.T) {
	agent, signer := startAgentKeys(t)
	stdout, stderr := newLineWriter(), newLineWriter()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runWebhook(ctx, []string{"listen", "--addr", "127.0.0.1:0", "--agent", agent, "--path", "/a2a", "--token", "tok"}, stdout, stderr)
	}()
	addr := strings.TrimPrefix(stderr.next(t, "listening on "), "listening on ")
	hook := "http://" + addr + "/a2a"
	if l := stderr.next(t, "accepting"); !strings.Contains(l, "signed for "+hook+" ") || !strings.Contains(l, agent+"/.well-known/jwks.json") {
		t.Fatalf("second line: %s", l)
	}

	body := `{"statusUpdate": {"taskId": "task-1",
		"status": {"state": "TASK_STATE_COMPLETED"}}}`
	sig, err := signer.Sign(hook, "task-1", "d-1", []byte(body), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(webhook.HeaderSignature, sig)
	h.Set(webhook.HeaderToken, "tok")
	if code := postDelivery(t, http.MethodPost, hook, h, body); code != http.StatusNoContent {
		t.Fatalf("signed delivery: HTTP %d", code)
	}
	var got struct {
		DeliveryID string          `json:"delivery_id"`
		TaskID     string          `json:"task_id"`
		KeyID      string          `json:"kid"`
		Event      json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal([]byte(stdout.next(t, "")), &got); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	json.Compact(&compact, []byte(body))
	if got.DeliveryID != "d-1" || got.TaskID != "task-1" || got.KeyID != "k1" || string(got.Event) != compact.String() {
		t.Fatalf("printed %+v", got)
	}

	for _, tc := range []struct {
		name, method, url string
		h                 http.Header
		want              int
		log               string
	}{
		{"replay", http.MethodPost, hook, h, http.StatusUnauthorized, webhook.ErrReplay.Error()},
		{"unsigned", http.MethodPost, hook, http.Header{"A2a-Notification-Token": {"tok"}}, http.StatusUnauthorized, webhook.ErrBadSignature.Error()},
		{"no token", http.MethodPost, hook, http.Header{"A2a-Push-Signature": {sig}}, http.StatusUnauthorized, webhook.ErrBadToken.Error()},
		{"other path", http.MethodPost, "http://" + addr + "/", h, http.StatusNotFound, ""},
		{"GET", http.MethodGet, hook, h, http.StatusMethodNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := postDelivery(t, tc.method, tc.url, tc.h, body); code != tc.want {
				t.Fatalf("HTTP %d, want %d", code, tc.want)
			}
			if tc.log != "" {
				stderr.next(t, tc.log)
			}
		})
	}
	select {
	case l := <-stdout.lines:
		t.Fatalf("printed a refused delivery: %s", l)
	default:
	}

	stop()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestWebhookListenUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no subcommand", nil},
		{"unknown subcommand", []string{"serve"}},
		{"no agent", []string{"listen", "--addr", "127.0.0.1:0"}},
		{"agent not a URL", []string{"listen", "--agent", "agent.example"}},
		{"relative path", []string{"listen", "--agent", "http://a.example", "--path", "hook"}},
		{"every interface", []string{"listen", "--agent", "http://a.example", "--addr", "0.0.0.0:0"}},
		{"every interface, no host", []string{"listen", "--agent", "http://a.example", "--addr", ":0"}},
		{"extra argument", []string{"listen", "--agent", "http://a.example", "now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := runWebhook(t.Context(), tc.args, &out, &out); exitCode(err) != 2 {
				t.Fatalf("got %v, want a usage error", err)
			}
		})
	}
}
