package handoff

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestToolSkillCancel: cancelling the A2A task cancels the MCP call it is
// running; the call is audited as cancelled, long before the tool's own end.
func TestToolSkillCancel(t *testing.T) {
	bin := buildMCPServer(t)
	events := filepath.Join(t.TempDir(), "events")
	c, err := ParseConfig("tools.yaml", strings.NewReader(fmt.Sprintf(`name: Tools
description: a slow tool
log: {level: error}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: [{name: notes, command: %q, args: [--events, %q]}]
tool_contracts:
  - {tool: notes__slow, effect: read, risk: low, approval: none, timeout: 2m}
skills:
  - {id: slow, name: Slow, executor: mcp, tool: notes__slow}
`, bin, events)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)

	_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"s1","role":"ROLE_USER","parts":[{"data":{"ms":600000}}]},
		"configuration":{"returnImmediately":true}}`)
	id := resultTask(t, out)["id"].(string)
	deadline := time.Now().Add(30 * time.Second)
	for b, _ := os.ReadFile(events); !strings.Contains(string(b), "start slow"); b, _ = os.ReadFile(events) {
		if time.Now().After(deadline) {
			t.Fatal("the slow tool never started")
		}
		time.Sleep(5 * time.Millisecond) // a file has no change notification
	}
	cancelled := time.Now()
	_, out = call(t, url, "", "", "CancelTask", fmt.Sprintf(`{"id":%q}`, id))
	if r, _ := out["result"].(map[string]any); r == nil || state(r) != "TASK_STATE_CANCELED" {
		t.Fatalf("CancelTask: %v", out)
	}

	// The pipeline writes its record when the call has ended.
	var rec map[string]any
	for rec == nil {
		if time.Now().After(deadline) {
			t.Fatal("no audit record of the cancelled call")
		}
		resp, err := http.Get(url + "/a2a/audit?task=" + id)
		if err != nil {
			t.Fatal(err)
		}
		var audit struct {
			Records []map[string]any `json:"records"`
		}
		err = json.NewDecoder(resp.Body).Decode(&audit)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(audit.Records) > 0 {
			rec = audit.Records[0]
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if rec["outcome"] != "cancelled" || rec["tool"] != "notes__slow" {
		t.Fatalf("audit record of the cancelled call: %v", rec)
	}
	if took := time.Since(cancelled); took > 20*time.Second {
		t.Fatalf("the call ended %s after the cancel", took)
	}
}
