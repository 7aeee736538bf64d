package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestRetentionPurgesFinishedTasks runs a front agent with
// retention.finished_tasks 2s delegating to a peer: its committed tasks
// answer GetTask, then, past the window, TaskNotFound and leave its list,
// while the commit ledger keeps their entries, marked with when their task
// was purged; `handoff store stats` counts the purge.
func TestRetentionPurgesFinishedTasks(t *testing.T) {
	bin := buildMCPServer(t)
	common := fmt.Sprintf(`auth: {anonymous: true}
log: {level: warn}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
`, bin)
	peer := launchAgent(t, "peer", freeAddr(t), "name: Counter\ndescription: Counts notes.\n"+common+
		"skills: [{id: notes-stats, name: Note stats, executor: mcp, tool: notes__stats}]\n")
	peer.waitReady()
	contract := writeFile(t, "count.yaml", `skill: count
version: "e2e-1"
artifacts:
  notes__stats: {type: object, required: [notes, bytes]}
commit_requires:
  - {artifact: notes__stats, pointer: /notes}
`)
	frontDir := t.TempDir()
	front := launch(t, "front", writeFile(t, "front.yaml", "name: Front\ndescription: Delegates counts.\n"+common+fmt.Sprintf(`retention: {finished_tasks: 2s}
peers: [{name: counter, url: %q, trust: {jku_prefixes: [%q]}}]
skills: [{id: count, name: Count, executor: delegate, delegate: {skill: notes-stats, contract: %q}}]
`, peer.base, peer.base+"/.well-known/", contract)), freeAddr(t), frontDir)
	front.waitReady()
	c := jsonrpcClient(t, front)

	var ids []a2a.TaskID
	for i := range 3 {
		task := sendTask(t, c, &a2a.SendMessageRequest{Message: skillMessage("count", fmt.Sprintf("count the notes (%d)", i))})
		wantState(t, "delegated count", task, a2a.TaskStateCompleted)
		getTask(t, c, task.ID) // kept within the window
		ids = append(ids, task.ID)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		for {
			_, err := c.GetTask(callCtx(t), &a2a.GetTaskRequest{ID: id})
			if errors.Is(err, a2a.ErrTaskNotFound) {
				break
			}
			if err != nil {
				t.Fatalf("GetTask(%s): %v, want the task or TaskNotFound", id, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s still there 20s after it finished, with finished_tasks 2s", id)
			}
			time.Sleep(100 * time.Millisecond) // polling, with a deadline
		}
	}
	if left := listTasks(t, front); len(left) != 0 {
		t.Fatalf("tasks listed after the purge: %s", asJSON(t, left))
	}
	if code := front.stop(os.Interrupt); code != 0 {
		t.Fatalf("front exited with %d after SIGINT%s", code, front.exitReason(code))
	}
	var entries []struct {
		DelegationID string    `json:"delegation_id"`
		TaskPurgedAt time.Time `json:"task_purged_at"`
	}
	if err := json.Unmarshal(jsonArray(runHandoff(t, "ledger", "--data-dir", frontDir, "--json")), &entries); err != nil {
		t.Fatalf("handoff ledger --json: %v", err)
	}
	purged := map[string]time.Time{}
	for _, e := range entries {
		purged[e.DelegationID] = e.TaskPurgedAt
	}
	for _, id := range ids {
		at, ok := purged[string(id)]
		if !ok || at.IsZero() {
			t.Errorf("ledger entry of task %s: %v (listed %v), want it kept and marked purged", id, at, ok)
		}
	}
	stats := runHandoff(t, "store", "stats", "--data-dir", frontDir)
	if !strings.Contains(stats, "tasks: 0") || !strings.Contains(stats, "(3 purged in all)") {
		t.Errorf("store stats after the purge:\n%s", stats)
	}
}
