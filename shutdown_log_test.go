package handoff

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// stopLog is a log destination the agent writes while the test reads.
type stopLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *stopLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *stopLog) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGracefulStopLeavesDelegationWithoutFailing: a graceful stop whose
// grace ends while a delegation waits on its peer leaves the delegation to
// resume at the next start, and says so; it does not log that tasks still
// running were failed, since none was.
func TestGracefulStopLeavesDelegationWithoutFailing(t *testing.T) {
	peerCfg, err := ParseConfig("peer.yaml", strings.NewReader(fmt.Sprintf(`name: Peer
description: sleeps
auth: {anonymous: true}
log: {level: error}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__slow, effect: read, risk: low, approval: none}]
skills: [{id: slow, name: Slow, executor: mcp, tool: notes__slow}]
`, buildMCPServer(t))))
	if err != nil {
		t.Fatal(err)
	}
	peerCfg.DataDir = t.TempDir()
	peer := startAgent(t, peerCfg)

	frontCfg, err := ParseConfig("front.yaml", strings.NewReader(fmt.Sprintf(`name: Front
description: delegates
auth: {anonymous: true}
limits: {shutdown_grace: 1s}
peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills: [{id: slow, name: S, executor: delegate, delegate: {skill: slow, contract: %q}}]
`, peer, peer+"/.well-known/", writeContract(t, t.TempDir(), "slow", "/notes", "true"))))
	if err != nil {
		t.Fatal(err)
	}
	frontCfg.DataDir = t.TempDir()
	var log stopLog
	_, front := serveAgent(t, frontCfg, WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelInfo}))))

	_, out := call(t, front, "", "", "SendMessage", `{"message":{"messageId":"m-slow","role":"ROLE_USER","metadata":{"handoff/skill":"slow"},
		"parts":[{"data":{"ms":60000}}]},"configuration":{"returnImmediately":true}}`)
	resultTask(t, out)
	// The peer's task runs: the delegation waits on it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, out := call(t, peer, "", "", "ListTasks", `{}`)
		if strings.Contains(fmt.Sprint(out["result"]), "TASK_STATE_WORKING") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer never ran the delegated task: %v\nfront log:\n%s", out, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopAgent(t, front)
	got := log.String()
	if !strings.Contains(got, "task left to resume at the next start") {
		t.Fatalf("the stop did not leave the delegation to resume; log:\n%s", got)
	}
	if strings.Contains(got, "were failed") {
		t.Fatalf("the stop logged failed tasks, though it only left a delegation to resume; log:\n%s", got)
	}
}
