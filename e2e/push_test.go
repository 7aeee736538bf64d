package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/push/webhook"
)

// TestPushSurvivesKill9: the webhook is down while the agent is killed -9
// and restarted; once both are back, every event of the task arrives, in
// order, verified with the agent's published key.
func TestPushSurvivesKill9(t *testing.T) {
	hookAddr := freeAddr(t) // nothing listens there yet: the receiver is down
	hook := "http://" + hookAddr + "/hook"
	dataDir := t.TempDir()
	cfg := agentConfig{dataDir: dataDir, pushRetryDelay: "20ms", pushMaxAttempts: 1000}
	ag := startAgent(t, cfg)
	task := sendTask(t, jsonrpcClient(t, ag), &a2a.SendMessageRequest{
		Message: userMessage(uniqueID("tck-stream-001"), "push me"),
		Config:  &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: hook, Token: "e2e-token-123"}},
	})
	wantState(t, "pushed task", task, a2a.TaskStateCompleted)
	ag.kill9()

	again := startAgent(t, cfg)
	r := startPushReceiver(t, hookAddr, again.base, task.ID)
	r.wantEvents(t, false, 30*time.Second, func() string { return "agent log:\n" + again.stderr.String() })
}

// pushReceiver is the webhook of one task: it verifies each delivery with the
// JWKS of the agent that signs it and the token e2e-token-123, and records the
// event kind of each.
type pushReceiver struct {
	mu     sync.Mutex
	all    []string       // the kind of every delivery, in arrival order
	first  []string       // the kind of the first delivery of each delivery ID
	ids    map[string]int // deliveries per delivery ID
	arrive chan struct{}
}

// startPushReceiver serves the webhook on addr, verified against the keys of
// the agent at base, until the test ends.
func startPushReceiver(t *testing.T, addr, base string, task a2a.TaskID) *pushReceiver {
	t.Helper()
	r := &pushReceiver{ids: map[string]int{}, arrive: make(chan struct{}, 64)}
	v := webhook.NewVerifier(base+"/.well-known/jwks.json", "http://"+addr+"/hook", webhook.WithToken("e2e-token-123"))
	mux := http.NewServeMux()
	mux.Handle("/hook", v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		d, _ := webhook.VerifiedFrom(req.Context())
		var ev map[string]json.RawMessage
		_ = json.Unmarshal(d.Body, &ev)
		r.mu.Lock()
		for k := range ev {
			r.all = append(r.all, k)
			if r.ids[d.DeliveryID] == 0 {
				r.first = append(r.first, k)
			}
		}
		r.ids[d.DeliveryID]++
		r.mu.Unlock()
		if d.TaskID != string(task) {
			t.Errorf("delivery for task %s, want %s", d.TaskID, task)
		}
		r.arrive <- struct{}{}
	})))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the receiver cannot come up on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

// wantEvents waits up to bound for the task's four events and wants them in
// order, under four delivery IDs. With redelivered, a delivery ID received
// again counts once, as at-least-once delivery allows; state describes the
// sender for a failure.
func (r *pushReceiver) wantEvents(t *testing.T, redelivered bool, bound time.Duration, state func() string) {
	t.Helper()
	const want = "task,statusUpdate,artifactUpdate,statusUpdate"
	deadline := time.After(bound)
	for {
		r.mu.Lock()
		got := r.all
		if redelivered {
			got = r.first
		}
		n, seen := len(got), strings.Join(got, ",")
		r.mu.Unlock()
		if n >= 4 {
			if seen != want {
				t.Fatalf("received %s, want %s", seen, want)
			}
			break
		}
		select {
		case <-r.arrive:
		case <-deadline:
			t.Fatalf("within %s the receiver got %d events (%s), want 4; %s", bound, n, seen, state())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) != 4 {
		t.Fatalf("delivery ids %v, want 4 distinct", r.ids)
	}
}
