package handoff

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// sleeper works for a while without a word, then answers with a data artifact.
type sleeper struct{ d time.Duration }

func (s sleeper) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		select {
		case <-time.After(s.d):
		case <-ctx.Done():
			return
		}
		art := a2a.NewArtifactEvent(ec, a2a.NewDataPart(map[string]any{"slept": true}))
		art.Artifact.Name = "result"
		if !yield(art, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (sleeper) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestQuietPeerWithinTheDeadline: a peer that works without a word for
// longer than the front's executor_idle_timeout, but within the delegation's
// timeout, is waited for: the delegation commits, where the idle watchdog
// used to fail it and cancel the peer's task.
func TestQuietPeerWithinTheDeadline(t *testing.T) {
	pc, err := ParseConfig("peer.yaml", strings.NewReader("name: Peer\ndescription: sleeps\nauth: {anonymous: true}\nlog: {level: error}\nlimits: {shutdown_grace: 1s}\nskills: [{id: sleep, name: Sleep, executor: go}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	pc.DataDir = t.TempDir()
	_, peer := serveAgent(t, pc, WithExecutor("sleep", sleeper{1500 * time.Millisecond}))
	contract := filepath.Join(t.TempDir(), "wait.yaml")
	if err := os.WriteFile(contract, []byte("skill: wait\nversion: \"1\"\nartifacts:\n  result: {type: object, required: [slept]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	front := startFromYAML(t, "front.yaml", "name: Front\ndescription: waits\nauth: {anonymous: true}\nlog: {level: error}\nlimits: {shutdown_grace: 1s, executor_idle_timeout: 300ms}\n"+
		fmt.Sprintf(`peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: wait, name: Wait, executor: delegate, delegate: {skill: sleep, contract: %q, timeout: 30s}}
`, peer, peer+"/.well-known/", contract))
	_, out := call(t, front, "", "", "SendMessage", `{"message":{"messageId":"q1","role":"ROLE_USER","parts":[{"text":"sleep"}]}}`)
	task := resultTask(t, out)
	if b := fmt.Sprint(task["status"]); state(task) != "TASK_STATE_COMPLETED" || !strings.Contains(b, "Committed") {
		t.Fatalf("a peer quiet for 1.5s with executor_idle_timeout 300ms: %s %s, want committed", state(task), b)
	}
}
