package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
)

// payPeer is an a2a-go executor that says what it does, in its own
// words: "reserving 1250 cents for order o-1" (working), then fails with
// "card declined"; with hold, it works until its task is canceled.
type payPeer struct{ hold bool }

func (p payPeer) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec,
				a2a.NewTextPart("reserving 1250 cents for order o-1"))), nil) {
			return
		}
		if p.hold {
			<-ctx.Done()
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("card declined"))), nil)
	}
}

func (payPeer) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// startPayFront starts a front agent (anonymous callers) delegating the
// skill pay to a payPeer and pay-slow, with a one-second timeout, to one
// that holds.
func startPayFront(t *testing.T) string {
	t.Helper()
	declines, holds := startPeerWith(t, payPeer{}, false, "declines"), startPeerWith(t, payPeer{hold: true}, false, "holds")
	contract := filepath.Join(t.TempDir(), "pay.yaml")
	if err := os.WriteFile(contract, []byte("skill: pay\nversion: \"1\"\nartifacts:\n  receipt: {type: object, required: [receipt]}\n"+
		"commit_requires:\n  - {artifact: receipt, pointer: /receipt}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(t.TempDir(), "pay-slow.yaml")
	if err := os.WriteFile(slow, []byte(strings.Replace(mustRead(t, contract), "skill: pay", "skill: pay-slow", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startFromYAML(t, "front.yaml", fmt.Sprintf(`name: Front
description: delegates payments
auth: {anonymous: true}
log: {level: error}
limits: {shutdown_grace: 1s}
peers:
  - {name: declines, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: holds, url: %q, trust: {jku_prefixes: [%q]}}
skills:
  - {id: pay, name: Pay, executor: delegate, delegate: {skill: scan, tags: [declines], contract: %q}}
  - {id: pay-slow, name: Pay slowly, executor: delegate, delegate: {skill: scan, tags: [holds], contract: %q, timeout: 1s}}
`, declines, declines+"/.well-known/", holds, holds+"/.well-known/", contract, slow))
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// delegationOf returns the front's listed delegation of the local task id.
func delegationOf(t *testing.T, front string, id a2a.TaskID) acceptance.Delegation {
	t.Helper()
	resp, err := http.Get(front + "/a2a/delegations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Delegations []acceptance.Delegation }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, d := range out.Delegations {
		if d.TaskID == string(id) {
			return d
		}
	}
	t.Fatalf("no delegation of task %s in %+v", id, out.Delegations)
	return acceptance.Delegation{}
}

// TestDelegationRelaysThePeersWords: the peer's progress message reaches
// our caller as the peer wrote it, and its own reason for failing ("card
// declined") is in our task's status message and the delegation's record.
func TestDelegationRelaysThePeersWords(t *testing.T) {
	front := startPayFront(t)
	c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{a2a.NewAgentInterface(front+pathJSONRPC, a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"order": "o-1"}))
	msg.Metadata = map[string]any{"handoff/skill": "pay"}
	var (
		id       a2a.TaskID
		progress []string
	)
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if id == "" {
			id = ev.TaskInfo().TaskID
		}
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && u.Status.State == a2a.TaskStateWorking && u.Status.Message != nil {
			progress = append(progress, messageText(u.Status.Message))
		}
	}
	relayed := false
	for _, p := range progress {
		relayed = relayed || p == "reserving 1250 cents for order o-1"
	}
	if !relayed {
		t.Errorf("progress %q: the peer's message is not relayed as it is", progress)
	}
	task, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if st := messageText(task.Status.Message); task.Status.State != a2a.TaskStateFailed || !strings.Contains(st, `"card declined"`) {
		t.Fatalf("front's task: %s %q, want failed with the peer's \"card declined\"", task.Status.State, st)
	}
	d := delegationOf(t, front, id)
	if d.RemoteState != a2a.TaskStateFailed || d.Outcome != "failed" || !strings.Contains(d.Reason, `"card declined"`) {
		t.Fatalf("delegation %+v, want the peer's failed state, outcome failed and its reason", d)
	}
}

// TestDelegationTimeoutRecorded: the skill's timeout passes while the
// peer works; the peer's task is canceled, and the delegation's record
// says so: remote state canceled, outcome failed, the deadline as reason.
func TestDelegationTimeoutRecorded(t *testing.T) {
	front := startPayFront(t)
	_, out := call(t, front, "", "", "SendMessage",
		`{"message":{"messageId":"slow-1","role":"ROLE_USER","metadata":{"handoff/skill":"pay-slow"},"parts":[{"data":{"order":"o-2"}}]}}`)
	task := resultTask(t, out)
	if st := fmt.Sprint(task["status"]); state(task) != "TASK_STATE_FAILED" || !strings.Contains(st, "deadline") {
		t.Fatalf("front's task: %s %s, want failed at the deadline", state(task), st)
	}
	d := delegationOf(t, front, a2a.TaskID(task["id"].(string)))
	if d.RemoteTaskID == "" || d.RemoteState != a2a.TaskStateCanceled || d.Outcome != "failed" || !strings.Contains(d.Reason, "deadline") {
		t.Fatalf("delegation %+v, want the peer's task canceled, outcome failed, the deadline as reason", d)
	}
}
