package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ask sends text to the agent over JSON-RPC and returns the task as JSON.
func ask(t *testing.T, agent, text string) (state, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", agent+"/a2a/jsonrpc", strings.NewReader(fmt.Sprintf(
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-%s","role":"ROLE_USER","parts":[{"text":%q}]}}}`, text, text)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		Result struct {
			Task struct {
				Status struct{ State string }
			}
		}
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return out.Result.Task.Status.State, string(b)
}

// TestExample runs the example as a newcomer would: asked about the seeded
// note, the Go skill answers with its text and the count the gate committed;
// asked about a missing note, it fails without delegating.
func TestExample(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	agent, wait, err := start(ctx, io.Discard, freeAddr(t), freeAddr(t), t.TempDir())
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); wait() })
	deadline := time.Now().Add(20 * time.Second)
	for { // the agents listen before start returns; poll only as a guard
		resp, err := http.Get(agent + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never got ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	state, body := ask(t, agent, "welcome")
	if state != "TASK_STATE_COMPLETED" || !strings.Contains(body, `Hello from the example MCP server.`) || !strings.Contains(body, "Notes kept: 1 (counted by counter, verified and committed)") {
		t.Errorf("welcome: %s %s", state, body)
	}
	state, body = ask(t, agent, "no-such-note")
	if state != "TASK_STATE_FAILED" || !strings.Contains(body, "nothing was delegated") {
		t.Errorf("no-such-note: %s %s", state, body)
	}
}
