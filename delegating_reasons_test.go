package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
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
// that holds. Its log is in logs; limits is its config's limits.
func startPayFront(t *testing.T, limits string) (front string, logs *syncBuffer) {
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
	c, err := ParseConfig("front.yaml", strings.NewReader(fmt.Sprintf(`name: Front
description: delegates payments
auth: {anonymous: true}
log: {level: error}
limits: %s
peers:
  - {name: declines, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: holds, url: %q, trust: {jku_prefixes: [%q]}}
skills:
  - {id: pay, name: Pay, executor: delegate, delegate: {skill: scan, tags: [declines], contract: %q}}
  - {id: pay-slow, name: Pay slowly, executor: delegate, delegate: {skill: scan, tags: [holds], contract: %q, timeout: 1s}}
`, limits, declines, declines+"/.well-known/", holds, holds+"/.well-known/", contract, slow)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	logs = &syncBuffer{}
	_, front = serveTools(t, c, logs)
	return front, logs
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
	front, logs := startPayFront(t, "{shutdown_grace: 1s}")
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
	// Our log has it too, at warn.
	logged := false
	for _, l := range strings.Split(logs.String(), "\n") {
		logged = logged || strings.Contains(l, `level=WARN msg="delegation not committed" task_id=`+string(id)) && strings.Contains(l, `card declined`)
	}
	if !logged {
		t.Fatalf("no warning with the peer's reason in the log:\n%s", logs.String())
	}
}

// TestDelegationTimeoutRecorded: the skill's timeout passes while the
// peer works; the peer's task is canceled, and the delegation's record
// says so: remote state canceled, outcome failed, the deadline as reason.
func TestDelegationTimeoutRecorded(t *testing.T) {
	front, _ := startPayFront(t, "{shutdown_grace: 1s}")
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

// TestDelegationStoppedByTheEngineRecorded: our task is canceled while the
// peer works in silence (the idle watchdog no longer ends a delegation
// within its deadline: TestQuietPeerWithinTheDeadline); the peer's task is
// canceled and the delegation's record says why, not "-".
func TestDelegationStoppedByTheEngineRecorded(t *testing.T) {
	front, _ := startPayFront(t, "{shutdown_grace: 1s, executor_idle_timeout: 500ms}")
	_, out := call(t, front, "", "", "SendMessage",
		`{"message":{"messageId":"idle-1","role":"ROLE_USER","metadata":{"handoff/skill":"pay-slow"},"parts":[{"data":{"order":"o-3"}}]},"configuration":{"returnImmediately":true}}`)
	task := resultTask(t, out)
	id := a2a.TaskID(task["id"].(string))
	var d acceptance.Delegation
	deadline, tick := time.NewTimer(10*time.Second), time.NewTicker(20*time.Millisecond)
	defer deadline.Stop()
	defer tick.Stop()
	for d = delegationOf(t, front, id); d.RemoteTaskID == ""; d = delegationOf(t, front, id) {
		select {
		case <-deadline.C:
			t.Fatalf("delegation %+v: the peer never named its task", d)
		case <-tick.C:
		}
	}
	if _, out := call(t, front, "", "", "CancelTask", fmt.Sprintf(`{"id":%q}`, id)); state(out["result"].(map[string]any)) != "TASK_STATE_CANCELED" {
		t.Fatalf("cancel: %v", out)
	}
	for d = delegationOf(t, front, id); d.Outcome == ""; d = delegationOf(t, front, id) {
		select {
		case <-deadline.C:
			t.Fatalf("delegation %+v: no outcome after its task ended", d)
		case <-tick.C:
		}
	}
	if d.RemoteState != a2a.TaskStateCanceled || d.Outcome != "failed" || !strings.Contains(d.Reason, "Our task ended") {
		t.Fatalf("delegation %+v, want the peer's task canceled, outcome failed and why our task ended", d)
	}
}

// flakyCards serves the peer at target, except its card, refused with 503
// the first fails times: a peer restarting while we do.
func flakyCards(t *testing.T, target string, fails int32) string {
	t.Helper()
	var seen atomic.Int32
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/agent-card.json") && seen.Add(1) <= fails {
			http.Error(w, "restarting", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestResumeWaitsForAnUnreachablePeer: the front restarts while its peer
// cannot be reached (its card answers 503 twice); the front asks again
// and ends in the peer's real final state, the peer's own "card
// declined", instead of failing the delegation at once.
func TestResumeWaitsForAnUnreachablePeer(t *testing.T) {
	peer := startPeerWith(t, payPeer{}, false, "declines")
	_, out := call(t, peer, "", "", "SendMessage", `{"message":{"messageId":"before-restart","role":"ROLE_USER","parts":[{"data":{}}]}}`)
	remote := resultTask(t, out)
	if state(remote) != "TASK_STATE_FAILED" {
		t.Fatalf("the peer's task: %v", remote)
	}

	// What the front had stored before it stopped: its task, working, following the peer's.
	dataDir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dataDir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	local := a2a.NewTaskID()
	rec := &delegation.Record{Peer: "flaky", RemoteTaskID: remote["id"].(string), IdempotencyKey: string(local), Deadline: time.Now().Add(time.Minute).UTC()}
	meta := rec.Metadata()
	meta[SkillMetadataKey] = "pay"
	ask := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{}))
	ask.TaskID = local
	task := &a2a.Task{ID: local, ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, History: []*a2a.Message{ask}, Metadata: meta}
	if err := st.Append(t.Context(), &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: tasks.AnonymousPrincipal}, Version: 1, Updated: time.Now()},
		[]a2a.Event{task}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	contract := filepath.Join(t.TempDir(), "pay.yaml")
	if err := os.WriteFile(contract, []byte("skill: pay\nversion: \"1\"\nartifacts:\n  receipt: {type: object}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfig("front.yaml", strings.NewReader(fmt.Sprintf(`name: Front
description: delegates payments
auth: {anonymous: true}
log: {level: error}
limits: {shutdown_grace: 1s}
peers: [{name: flaky, url: %q, trust: {jku_prefixes: [%q]}}]
skills: [{id: pay, name: Pay, executor: delegate, delegate: {skill: scan, contract: %q}}]
`, flakyCards(t, peer, 2), peer+"/.well-known/", contract)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = dataDir
	front := startAgent(t, c)

	var got map[string]any
	deadline, tick := time.NewTimer(30*time.Second), time.NewTicker(20*time.Millisecond)
	defer deadline.Stop()
	defer tick.Stop()
	for got == nil || state(got) == "TASK_STATE_WORKING" {
		select {
		case <-deadline.C:
			t.Fatalf("the resumed task did not end: %v", got)
		case <-tick.C:
		}
		_, out := call(t, front, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, local))
		got, _ = out["result"].(map[string]any)
	}
	if st := fmt.Sprint(got["status"]); state(got) != "TASK_STATE_FAILED" || !strings.Contains(st, `"card declined"`) {
		t.Fatalf("resumed task: %s %s, want the peer's own failure", state(got), st)
	}
}

// messageText joins the text parts of m; "" for nil.
func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p != nil {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}
