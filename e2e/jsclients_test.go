package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/push/webhook"
)

// a2aJSDir holds the A2A JS SDK client checks: 0.3 (sdk03) and 1.x (sdk1).
const a2aJSDir = "a2ajs"

// hook is a webhook receiver that verifies every delivery's push JWT with
// webhook.Verifier, as a webhook owner would, and records what it accepted.
type hook struct {
	url      string
	verifier *webhook.Verifier
	mu       sync.Mutex
	verified map[string][]string // task id → the notification tokens its deliveries carried
	refused  []string
}

func startHook(t *testing.T, agentBase string) *hook {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hook{url: "http://" + ln.Addr().String() + "/hook", verified: map[string][]string{}}
	h.verifier = webhook.NewVerifier(agentBase+"/.well-known/jwks.json", h.url)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		v, err := h.verifier.Verify(r.Context(), r.Header, body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.refused = append(h.refused, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.verified[v.TaskID] = append(h.verified[v.TaskID], r.Header.Get("X-A2A-Notification-Token"))
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

// tokensFor waits until the task's deliveries arrived and returns their tokens.
func (h *hook) tokensFor(t *testing.T, task string) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		h.mu.Lock()
		got, refused := append([]string(nil), h.verified[task]...), append([]string(nil), h.refused...)
		h.mu.Unlock()
		if len(got) > 0 || time.Now().After(deadline) {
			if len(refused) > 0 {
				t.Errorf("the webhook refused deliveries: %q", refused)
			}
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJSSDKClients runs the A2A test kit's conventions with the official JS
// SDK clients, 0.3 (@a2a-js/sdk 0.3.14) and 1.x (1.3.0), over JSON-RPC and
// HTTP+JSON, against the conformance agent: sends, streams, input-required
// turns, resubscribe (kept open through input-required on 1.0), cancel,
// errors, push config CRUD with an idempotent delete, and a push delivery
// whose JWT the webhook verifies.
func TestJSSDKClients(t *testing.T) {
	requireNPM(t, a2aJSDir, "sdk1")
	a := startAgent(t, agentConfig{})
	wh := startHook(t, a.base)
	for _, script := range []string{"client03.mjs", "client1.mjs"} {
		for _, transport := range []string{"JSONRPC", "HTTP+JSON"} {
			t.Run(strings.TrimSuffix(script, ".mjs")+"/"+transport, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, "node", script, a.base, transport, wh.url)
				cmd.Dir = a2aJSDir
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
				}
				var checks map[string]struct {
					OK     bool
					Detail json.RawMessage
				}
				if err := json.Unmarshal(out, &checks); err != nil {
					t.Fatalf("%s output %q: %v", script, out, err)
				}
				if len(checks) < 10 {
					t.Errorf("%s ran %d checks, want every one of them", script, len(checks))
				}
				for name, c := range checks {
					if !c.OK {
						var detail string
						_ = json.Unmarshal(c.Detail, &detail)
						t.Errorf("%s: %s", name, detail)
					}
				}
				var pushed string
				if err := json.Unmarshal(checks["push-delivery"].Detail, &pushed); err != nil || pushed == "" {
					t.Fatalf("push-delivery named no task: %s", checks["push-delivery"].Detail)
				}
				want := map[string]string{"client03.mjs": "delivery-token-03", "client1.mjs": "delivery-token-1"}[script]
				tokens := wh.tokensFor(t, pushed)
				if len(tokens) == 0 {
					t.Fatalf("no verified push delivery for task %s", pushed)
				}
				for _, tok := range tokens {
					if tok != want {
						t.Errorf("a delivery for %s carried token %q, want %q", pushed, tok, want)
					}
				}
			})
		}
	}
}
