package handoff

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// buildMCPServer builds examples/mcpserver once for the test.
func buildMCPServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("build the example MCP server: %v\n%s", err, out)
	}
	return bin
}

func resultTask(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	r, _ := out["result"].(map[string]any)
	task, _ := r["task"].(map[string]any)
	if task == nil {
		t.Fatalf("no task in %v", out)
	}
	return task
}

func state(task map[string]any) string {
	return task["status"].(map[string]any)["state"].(string)
}

// TestToolSkillNeedsApproval: a write tool runs only after a listed
// approver answers the approval request, for exactly those arguments.
func TestToolSkillNeedsApproval(t *testing.T) {
	bin := buildMCPServer(t)
	yaml := fmt.Sprintf(`name: Tools
description: notes
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  anonymous: true
  api_keys: [{name: ops, sha256: %s}]
approvers: ["key:ops"]
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: none}
  - {tool: notes__write_note, effect: write, risk: high, approval: mandatory, redact: [text]}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
  - {id: write-note, name: Write, executor: mcp, tool: notes__write_note}
`, auth.HashAPIKey("ops-key"), bin)
	c, err := ParseConfig("tools.yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)

	write := `{"message":{"messageId":"w1","role":"ROLE_USER","metadata":{"handoff/skill":"write-note"},
		"parts":[{"data":{"name":"n1","text":"top secret text"}}]}}`
	_, out := call(t, url, "", "", "SendMessage", write)
	task := resultTask(t, out)
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("write without approval: %v", task)
	}
	id := task["id"].(string)
	var req map[string]any
	for _, p := range task["status"].(map[string]any)["message"].(map[string]any)["parts"].([]any) {
		if d, ok := p.(map[string]any)["data"].(map[string]any); ok {
			req, _ = d["approval_request"].(map[string]any)
		}
	}
	if req == nil || req["digest"] == "" || req["token"] == "" {
		t.Fatalf("no approval request in %v", task["status"])
	}
	approve := func(header, value string, digest any) map[string]any {
		a, _ := json.Marshal(map[string]any{"approval": map[string]any{
			"tool": req["tool"], "snapshot_version": req["snapshot_version"], "digest": digest, "token": req["token"]}})
		_, out := call(t, url, header, value, "SendMessage", fmt.Sprintf(`{"message":{"messageId":%q,"taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`,
			"a-"+value+fmt.Sprint(digest), id, a))
		return out
	}
	// The owner (anonymous) is no approver: the task keeps waiting.
	if got := resultTask(t, approve("", "", req["digest"])); state(got) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("approval by a non-approver: %v", got["status"])
	}
	// An approver, for other arguments: still waiting.
	if st := state(resultTask(t, approve("X-API-Key", "ops-key", "0000"))); st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("approval for other arguments: %s", st)
	}
	// Nothing was written so far.
	read := `{"message":{"messageId":"r1","role":"ROLE_USER","parts":[{"text":"n1"}]}}`
	_, out = call(t, url, "", "", "SendMessage", read)
	if b, _ := json.Marshal(out); strings.Contains(string(b), "top secret text") {
		t.Fatalf("the note exists before the approval: %s", b)
	}
	// The approver, for these arguments: it runs.
	if st := state(resultTask(t, approve("X-API-Key", "ops-key", req["digest"]))); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("approved write: %s", st)
	}
	_, out = call(t, url, "", "", "SendMessage", strings.Replace(read, "r1", "r2", 1))
	task = resultTask(t, out)
	if b, _ := json.Marshal(task); state(task) != "TASK_STATE_COMPLETED" || !strings.Contains(string(b), "top secret text") {
		t.Fatalf("read after the write: %s", b)
	}
	// The approver sees every call in the audit log, the write approved by key:ops.
	resp, err := http.NewRequest("GET", url+"/a2a/audit?task="+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("X-API-Key", "ops-key")
	ar, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	var audit struct {
		Records []map[string]any `json:"records"`
	}
	json.NewDecoder(ar.Body).Decode(&audit)
	ar.Body.Close()
	approved := false
	for _, r := range audit.Records {
		if r["approver"] == "key:ops" && r["outcome"] == "success" {
			approved = true
		}
	}
	if !approved || len(audit.Records) < 3 {
		t.Fatalf("audit of the task: %v", audit.Records)
	}
	// The audit log never holds the redacted text.
	raw, err := os.ReadFile(filepath.Join(c.DataDir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "top secret text") {
		t.Fatal("the audit log holds a redacted argument")
	}
}
