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

	"github.com/handoff-a2a/handoff/push"
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
	var (
		mu     sync.Mutex
		got    []string
		ids    = map[string]int{}
		arrive = make(chan struct{}, 64)
	)
	v := push.NewVerifier(again.base+"/.well-known/jwks.json", hook, push.WithToken("e2e-token-123"))
	mux := http.NewServeMux()
	mux.Handle("/hook", v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := push.VerifiedFrom(r.Context())
		var ev map[string]json.RawMessage
		_ = json.Unmarshal(d.Body, &ev)
		mu.Lock()
		for k := range ev {
			got = append(got, k)
		}
		ids[d.DeliveryID]++
		mu.Unlock()
		if d.TaskID != string(task.ID) {
			t.Errorf("delivery for task %s, want %s", d.TaskID, task.ID)
		}
		arrive <- struct{}{}
	})))
	ln, err := net.Listen("tcp", hookAddr)
	if err != nil {
		t.Fatalf("the receiver cannot come back on %s: %v", hookAddr, err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	want := "task,statusUpdate,artifactUpdate,statusUpdate"
	deadline := time.After(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		seen := strings.Join(got, ",")
		mu.Unlock()
		if n >= 4 {
			if seen != want {
				t.Fatalf("received %s, want %s", seen, want)
			}
			break
		}
		select {
		case <-arrive:
		case <-deadline:
			t.Fatalf("after the restart the receiver got %d events (%s), want 4; agent log:\n%s", n, seen, again.stderr.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 4 {
		t.Fatalf("delivery ids %v, want 4 distinct", ids)
	}
}
