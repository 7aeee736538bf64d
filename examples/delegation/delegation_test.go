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

// TestExample runs the example as a newcomer would and checks its story:
// the honest peer's answer is committed, the liar's is not.
func TestExample(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	front, wait, err := start(ctx, io.Discard, freeAddr(t), freeAddr(t), freeAddr(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); wait() })
	deadline := time.Now().Add(20 * time.Second)
	for { // the agents listen before start returns; their MCP servers connect on their own
		if resp, err := http.Get(front + "/readyz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the front agent never got ready")
		}
	}
	for skill, want := range map[string]string{
		"count-notes":      "TASK_STATE_COMPLETED",
		"count-notes-liar": "TASK_STATE_FAILED",
	} {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-%s","role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"text":"count"}]}}}`, skill, skill)
		req, _ := http.NewRequest("POST", front+"/a2a/jsonrpc", strings.NewReader(body))
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Result struct {
				Task struct {
					Status struct {
						State   string          `json:"state"`
						Message json.RawMessage `json:"message"`
					} `json:"status"`
				} `json:"task"`
			} `json:"result"`
		}
		json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if got := out.Result.Task.Status.State; got != want {
			t.Errorf("%s: %s (%s), want %s", skill, got, out.Result.Task.Status.Message, want)
		}
	}
}
