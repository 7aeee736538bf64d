package handoff

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// TestEnvelopeIdempotencyKey: the receiver gives one caller's repeated
// idempotency key the task the first message started, by blocking send and
// by stream; without the key, or under another key, a message starts its own.
func TestEnvelopeIdempotencyKey(t *testing.T) {
	bin := buildMCPServer(t)
	peer := startFromYAML(t, "peer.yaml", fmt.Sprintf(`name: Peer
description: counts notes
auth: {anonymous: true}
log: {level: error}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
skills: [{id: notes-stats, name: Stats, executor: mcp, tool: notes__stats}]
`, bin))
	send := func(id, key string) string {
		t.Helper()
		env := ""
		if key != "" {
			env = fmt.Sprintf(`,"metadata":{"https://github.com/handoff-a2a/handoff/ext/delegation/v1":{"actor":"x","hops":1,"deadline":%q,"idempotencyKey":%q,"provenance":[{"agent":"Front"}]}}`,
				time.Now().Add(time.Minute).UTC().Format(time.RFC3339), key)
		}
		_, out := call(t, peer, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"data":{}}]%s}}`, id, env))
		task := resultTask(t, out)
		if state(task) != "TASK_STATE_COMPLETED" {
			t.Fatalf("message %s: %v", id, task)
		}
		return task["id"].(string)
	}
	first := send("m1", "key-1")
	if again := send("m2", "key-1"); again != first {
		t.Fatalf("repeated key: task %s, want %s", again, first)
	}
	if other := send("m3", "key-2"); other == first {
		t.Fatal("another key got the first key's task")
	}
	if plain := send("m4", ""); plain == first {
		t.Fatal("a message without an envelope got the key's task")
	}
}

// TestResumeBeforeThePeerAnswered: the agent died after recording its
// intent to delegate but before it recorded the peer's task (which the peer
// had already started). Restarted, it sends again with the same idempotency
// key, reaches the task the peer already has, and commits it: the peer
// holds one task.
func TestResumeBeforeThePeerAnswered(t *testing.T) {
	common, peer := startNotesPeer(t)

	// What the dead agent had sent: the peer's task exists under the key.
	local := a2a.NewTaskID()
	_, out := call(t, peer, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"before-crash","role":"ROLE_USER","parts":[{"data":{}}],
		"metadata":{%q:{"actor":"anonymous","hops":1,"deadline":%q,"idempotencyKey":%q,"provenance":[{"agent":"Front"}]}}}}`,
		delegation.EnvelopeExtension, time.Now().Add(time.Minute).UTC().Format(time.RFC3339), local))
	remote := resultTask(t, out)["id"].(string)

	// What the dead agent had stored: its task, working, with the record of its intent.
	dataDir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dataDir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec := &delegation.Record{Peer: "peer", IdempotencyKey: string(local), Deadline: time.Now().Add(time.Minute).UTC()}
	meta := rec.Metadata()
	meta[SkillMetadataKey] = "honest"
	ask := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{}))
	ask.TaskID = local
	task := &a2a.Task{ID: local, ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{ask}, Metadata: meta}
	snap := &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: tasks.AnonymousPrincipal}, Version: 1, Updated: time.Now()}
	if err := st.Append(t.Context(), snap, []a2a.Event{task}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	c, err := ParseConfig("front.yaml", strings.NewReader("name: Front\ndescription: delegates\n"+common+fmt.Sprintf(`peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
`, peer, peer+"/.well-known/", writeContract(t, t.TempDir(), "honest", "/notes", "result.notes == evidence.notes__stats.notes"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = dataDir
	front := startAgent(t, c)

	var got map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, out := call(t, front, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, local))
		got, _ = out["result"].(map[string]any)
		if s, _ := got["status"].(map[string]any); s != nil && s["state"] != "TASK_STATE_WORKING" && s["state"] != "TASK_STATE_SUBMITTED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed task did not end: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if state(got) != "TASK_STATE_COMPLETED" {
		t.Fatalf("resumed task: %v", got)
	}
	final, _, err := delegation.RecordFrom(got["metadata"].(map[string]any))
	if err != nil || final.RemoteTaskID != remote || final.Outcome != "committed" {
		t.Fatalf("record %+v (%v), want remote task %s committed", final, err, remote)
	}
	_, out = call(t, peer, "", "", "ListTasks", `{}`)
	if list, _ := out["result"].(map[string]any)["tasks"].([]any); len(list) != 1 {
		t.Fatalf("the peer holds %d tasks, want 1: %v", len(list), out)
	}
}
