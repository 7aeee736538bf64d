package handoff

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestApproverOnlyApproves: on another caller's task an approver may only answer its
// approval request. Any other message is refused as TaskNotFound; an approval gets back
// the approval's outcome, not the task's history or artifacts; and the owner's history
// gains the approval decision only, nothing else of the approver's message.
func TestApproverOnlyApproves(t *testing.T) {
	bin := buildMCPServer(t)
	c := redactConfig(t, bin, filepath.Join(t.TempDir(), "events"), t.TempDir())
	url := startAgent(t, c)
	const remark = "approver-remark-5e1"

	_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"w1","role":"ROLE_USER",
		"metadata":{"handoff/skill":"write-note"},"parts":[{"data":{"name":"n1","text":"hello"}}]}}`)
	task := resultTask(t, out)
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("write: %v", task)
	}
	id := task["id"].(string)
	approval := approvalOf(t, task)

	// Anything but an approval, from the approver: the task does not exist for it.
	for name, parts := range map[string]string{
		"text":        fmt.Sprintf(`[{"text":%q}]`, remark),
		"other data":  fmt.Sprintf(`[{"data":{"note":%q}}]`, remark),
		"approval {}": `[{"data":{"approval":"yes"}}]`,
	} {
		_, out := call(t, url, "X-API-Key", "ops-key", "SendMessage",
			fmt.Sprintf(`{"message":{"messageId":"x-%s","taskId":%q,"role":"ROLE_USER","parts":%s}}`, name, id, parts))
		e, _ := out["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32001) {
			t.Errorf("approver's %s message: %v, want TaskNotFound (-32001)", name, out)
		}
	}
	// The approval, with a remark beside it: the outcome only.
	_, out = call(t, url, "X-API-Key", "ops-key", "SendMessage",
		fmt.Sprintf(`{"message":{"messageId":"a1","taskId":%q,"role":"ROLE_USER","metadata":{"why":%q},"parts":[{"text":%q},{"data":%s}]}}`,
			id, remark, remark, approval))
	got := resultTask(t, out)
	if state(got) != "TASK_STATE_COMPLETED" || got["id"] != id {
		t.Fatalf("approval: %v", got)
	}
	if b, _ := json.Marshal(got); got["history"] != nil || got["artifacts"] != nil || strings.Contains(string(b), "saved n1") {
		t.Errorf("the approver got the task's content: %s", b)
	}
	// The owner's history: the request, the approval request, the decision alone.
	_, out = call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, id))
	owned := out["result"].(map[string]any)
	b, _ := json.Marshal(owned)
	if strings.Contains(string(b), remark) {
		t.Errorf("the owner's task holds the approver's remark: %s", b)
	}
	history := owned["history"].([]any)
	last := history[len(history)-1].(map[string]any)
	parts := last["parts"].([]any)
	if len(history) != 3 || last["messageId"] != "a1" || len(parts) != 1 || parts[0].(map[string]any)["data"].(map[string]any)["approval"] == nil {
		t.Errorf("the owner's history: %s", b)
	}
	if !strings.Contains(string(b), "saved n1") {
		t.Errorf("the owner's task lacks its result: %s", b)
	}
}
