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
// final state, status text, id and artifacts' text.
func send(t *testing.T, front, skill, text string) (state, status, id, artifact string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-%s","role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"text":%q}]}}}`, skill, skill, text)
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
				ID        string `json:"id"`
				Artifacts []struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"artifacts"`
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
	for _, a := range out.Result.Task.Artifacts {
		for _, p := range a.Parts {
			artifact += p.Text
		}
	}
	return s.State, status, out.Result.Task.ID, artifact
}

// TestExample runs the example as a newcomer would and checks its story:
// the honest peer's answer is committed, the liar's is not, both when a
// delegate skill is asked directly and when the front's model skill calls
// its own MCP tool and both delegates as tools; once the agents stopped
// the front's ledger holds the honest delegations only.
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
		if state, status, _, _ := send(t, front, tc.skill, "count"); state != tc.state || !strings.HasPrefix(status, tc.status) {
			t.Errorf("%s: %s %q, want %s %q…", tc.skill, state, status, tc.state, tc.status)
		}
	}
	state, status, assistant, answer := send(t, front, "assistant", "count the notes")
	if state != "TASK_STATE_COMPLETED" || !strings.Contains(answer, `"decision":"unknown"`) || !strings.Contains(answer, "not_committed") {
		t.Errorf("assistant: %s %q, answer %q; want completed, the liar's delegation not committed", state, status, answer)
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
	if err != nil || len(entries) != 2 || entries[0].Skill != "count-notes" || entries[1].Skill != "count-notes" {
		t.Fatalf("the front's ledger = %+v (%v), want the two honest delegations", entries, err)
	}
	var fromModel bool
	for _, e := range entries {
		fromModel = fromModel || strings.HasPrefix(e.DelegationID, assistant+"#count-notes-")
	}
	if !fromModel {
		t.Errorf("the ledger %+v has no entry of the assistant's task %s", entries, assistant)
	}
}
