package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// send asks the front agent for skill over JSON-RPC and returns the task's
// final state and status text.
func send(t *testing.T, front, skill string) (state, status string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-%s","role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"text":"count"}]}}}`, skill, skill)
	req, err := http.NewRequestWithContext(t.Context(), "POST", front+"/a2a/jsonrpc", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", skill, err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Task struct {
				Status struct {
					State   string `json:"state"`
					Message struct {
						Parts []struct {
							Text string `json:"text"`
						} `json:"parts"`
					} `json:"message"`
				} `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: decode the answer: %v", skill, err)
	}
	s := out.Result.Task.Status
	for _, p := range s.Message.Parts {
		status += p.Text
	}
	return s.State, status
}

// TestExample runs the example as a newcomer would and checks its story:
// the honest peer's answer is committed, the liar's is not, and once the
// agents stopped the front's ledger holds the honest delegation only.
func TestExample(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	dataDir := t.TempDir()
	front, wait, err := start(ctx, io.Discard, freeAddr(t), freeAddr(t), freeAddr(t), dataDir)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			wait()
		}
	})
	// The agents listen before start returns; poll only as a guard.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(front + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the front agent never got ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, tc := range []struct{ skill, state, status string }{
		{"count-notes", "TASK_STATE_COMPLETED", "Committed: peer honest's completion passed the contract"},
		{"count-notes-liar", "TASK_STATE_FAILED", "Not committed: unknown (peer liar"},
	} {
		if state, status := send(t, front, tc.skill); state != tc.state || !strings.HasPrefix(status, tc.status) {
			t.Errorf("%s: %s %q, want %s %q…", tc.skill, state, status, tc.state, tc.status)
		}
	}

	stop() // what Ctrl-C does
	wait()
	stopped = true
	l, err := acceptance.OpenBoltLedger(filepath.Join(dataDir, "front", "ledger.db"))
	if err != nil {
		t.Fatalf("open the front's ledger after the stop: %v", err)
	}
	defer l.Close()
	entries, err := l.List(t.Context(), 0)
	if err != nil || len(entries) != 1 || entries[0].Skill != "count-notes" {
		t.Fatalf("the front's ledger = %+v (%v), want the one honest delegation", entries, err)
	}
}
