package handoff

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/redistest"
)

// TestAgentOnRedis runs one agent on the machine's Redis (a namespace of
// its own): a task sent is stored there, and readiness reports the store.
func TestAgentOnRedis(t *testing.T) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
	if err != nil {
		t.Fatalf("this test needs Redis on 127.0.0.1:6379 (apt-get install redis-server): %v", err)
	}
	conn.Close()
	c := testConfig(t)
	c.Store = StoreConfig{Kind: "redis", URL: "redis://127.0.0.1:6379/0", Namespace: redistest.Namespace(t, "handoff-test-"),
		SecretKeyFiles: []string{secretFile(t)}}
	url := startAgent(t, c)
	status, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"tck-complete-task-r","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	if status != http.StatusOK || out["result"] == nil {
		t.Fatalf("send: %d %v", status, out)
	}
	id := out["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	if _, out := call(t, url, "", "", "GetTask", `{"id":"`+id+`"}`); out["result"] == nil {
		t.Fatalf("get: %v", out)
	}
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "redis") {
		t.Fatalf("readyz: %d %s", resp.StatusCode, b)
	}
	// The store is really Redis: a second agent on the same namespace (after
	// the first stopped) reads the task back.
	stopAgent(t, url)
	c2 := testConfig(t)
	c2.Store = c.Store
	url2 := startAgent(t, c2)
	if _, out := call(t, url2, "", "", "GetTask", `{"id":"`+id+`"}`); out["result"] == nil {
		t.Fatalf("get from a second agent: %v", out)
	}
}
