package handoff

import (
	"fmt"
	"testing"
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
			env = fmt.Sprintf(`,"metadata":{"https://github.com/handoff-a2a/handoff/ext/delegation/v1":{"actor":"x","hops":1,"idempotencyKey":%q,"provenance":[{"agent":"Front"}]}}`, key)
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
