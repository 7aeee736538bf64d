package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/mcp"
)

// noteKeeper is an executor as a Go team writes it for a2a-go: it saves the
// note the request names, through the agent's governed tools, then reads it
// back and answers with what the tool returned. It knows nothing of
// approvals beyond yielding the error Call returns.
type noteKeeper struct{}

func (noteKeeper) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		// The request is the task's first user message: after an approval,
		// ec.Message is the approver's answer.
		req := ec.Message
		if ec.StoredTask != nil {
			for _, m := range ec.StoredTask.History {
				if m.Role == a2a.MessageRoleUser {
					req = m
					break
				}
			}
		} else if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		var args map[string]any
		for _, p := range req.Parts {
			if d, ok := p.Data().(map[string]any); ok {
				args = d
			}
		}
		tools := Tools(ctx)
		wrote, err := tools.Call(ctx, "notes__write_note", args)
		if err != nil {
			yield(nil, err) // an approval is needed: the task waits for it
			return
		}
		if wrote.Outcome != mcp.OutcomeSuccess {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(wrote.Err.Error()))), nil)
			return
		}
		read, err := tools.Call(ctx, "notes__read_note", map[string]any{"name": args["name"]})
		if err != nil || read.Outcome != mcp.OutcomeSuccess {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, nil), nil)
			return
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("kept: "+read.Text)), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (noteKeeper) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func goAgentConfig(t *testing.T, bin string) *Config {
	t.Helper()
	c, err := ParseConfig("go.yaml", strings.NewReader(fmt.Sprintf(`name: Keeper
description: keeps notes with a Go executor
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  anonymous: true
  api_keys: [{name: ops, sha256: %s}]
approvers: ["key:ops"]
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: none}
  - {tool: notes__write_note, effect: write, risk: high, approval: mandatory}
skills:
  - {id: keep, name: Keep a note, executor: go}
`, auth.HashAPIKey("ops-key"), bin)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	return c
}

// TestGoExecutorsMatchTheConfig: a `go` skill without an executor, and an
// executor for a skill that is not `go`, stop New with the skill's id.
func TestGoExecutorsMatchTheConfig(t *testing.T) {
	c, err := ParseConfig("go.yaml", strings.NewReader(minimalConfig+"  - {id: mine, name: Mine, executor: go}\nlog: {level: error}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	if _, err := New(t.Context(), c); err == nil || !strings.Contains(err.Error(), "skill mine has executor: go") {
		t.Errorf("New without the executor: %v, want the skill named", err)
	}
	if _, err := New(t.Context(), c, WithExecutor("mine", noteKeeper{}), WithExecutor("s", noteKeeper{})); err == nil || !strings.Contains(err.Error(), "names skill s") {
		t.Errorf("New with an executor for the tck skill: %v, want it refused", err)
	}
}

// TestGoExecutorCallNeedsApproval: a Go executor's write through Tools
// waits input-required with the same approval request a tool skill gives;
// the approver's answer runs it again, the write goes through once, and the
// executor answers from the tool's result.
func TestGoExecutorCallNeedsApproval(t *testing.T) {
	c := goAgentConfig(t, buildMCPServer(t))
	_, url := serveAgent(t, c, WithExecutor("keep", noteKeeper{}))

	_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"k1","role":"ROLE_USER","parts":[{"data":{"name":"n1","text":"buy milk"}}]}}`)
	task := resultTask(t, out)
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("a write without approval: %v", task["status"])
	}
	var req map[string]any
	for _, p := range task["status"].(map[string]any)["message"].(map[string]any)["parts"].([]any) {
		if d, ok := p.(map[string]any)["data"].(map[string]any); ok {
			req, _ = d["approval_request"].(map[string]any)
		}
	}
	if req == nil || req["tool"] != "notes__write_note" || req["token"] == "" {
		t.Fatalf("no approval request in %v", task["status"])
	}
	a, _ := json.Marshal(map[string]any{"approval": map[string]any{
		"tool": req["tool"], "snapshot_version": req["snapshot_version"], "digest": req["digest"], "token": req["token"]}})
	_, out = call(t, url, "X-API-Key", "ops-key", "SendMessage",
		fmt.Sprintf(`{"message":{"messageId":"a1","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`, task["id"], a))
	if st := state(resultTask(t, out)); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("after the approval: %s, want completed", st)
	}
	_, out = call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, task["id"]))
	b, _ := json.Marshal(out)
	if !strings.Contains(string(b), "kept: buy milk") {
		t.Fatalf("the executor did not answer from the tool's result: %s", b)
	}
}

// TestToolsOutsideAGoExecutor: Tools outside an Execute fails clearly.
func TestToolsOutsideAGoExecutor(t *testing.T) {
	if _, err := Tools(t.Context()).Call(t.Context(), "notes__read_note", nil); !errors.Is(err, ErrNoTools) {
		t.Fatalf("Call outside an executor: %v, want ErrNoTools", err)
	}
	if Tools(t.Context()).Snapshot() != nil {
		t.Fatal("a snapshot outside an executor")
	}
}

// checker asks, through Delegate, the delegate skill its request names, and
// answers from the gate's decision: the committed evidence, or why not.
type checker struct{}

func (checker) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		skill := ec.Message.Parts[0].Text()
		d, err := Delegate(ctx, skill, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{})))
		if err != nil {
			yield(nil, err)
			return
		}
		if d.Outcome != acceptance.Committed {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec,
				a2a.NewTextPart(fmt.Sprintf("%s: %s", d.Outcome, d.Reason)))), nil)
			return
		}
		var notes any
		for _, a := range d.Artifacts {
			for _, p := range a.Parts {
				if m, ok := p.Data().(map[string]any); ok {
					notes = m["notes"]
				}
			}
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(fmt.Sprintf("committed by %s: %v notes", d.Peer, notes))), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (checker) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestGoExecutorDelegates: a Go executor's Delegate runs the delegation
// through the gate: an honest peer's completion comes back committed with
// its evidence, a contradicted one rejected with the reasons, and only the
// commit reaches the ledger.
func TestGoExecutorDelegates(t *testing.T) {
	common, peer := startNotesPeer(t)
	dir := t.TempDir()
	c, err := ParseConfig("front.yaml", strings.NewReader("name: Front\ndescription: checks with Go\n"+common+fmt.Sprintf(`peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: check, name: Check, executor: go}
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
  - {id: contradicted, name: C, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
`, peer, peer+"/.well-known/",
		writeContract(t, dir, "honest", "/notes", "result.notes == evidence.notes__stats.notes"),
		writeContract(t, dir, "contradicted", "/notes", "result.notes == evidence.notes__stats.notes + 1.0"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	front, url := serveAgent(t, c, WithExecutor("check", checker{}))

	for _, tc := range []struct{ skill, state, text string }{
		{"honest", "TASK_STATE_COMPLETED", "committed by peer: "},
		{"contradicted", "TASK_STATE_FAILED", "rejected: "},
	} {
		_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(
			`{"message":{"messageId":"g-%s","role":"ROLE_USER","metadata":{"handoff/skill":"check"},"parts":[{"text":%q}]}}`, tc.skill, tc.skill))
		task := resultTask(t, out)
		b, _ := json.Marshal(task)
		if state(task) != tc.state || !strings.Contains(string(b), tc.text) {
			t.Fatalf("%s: %s %s, want %s with %q", tc.skill, state(task), b, tc.state, tc.text)
		}
		if tc.skill == "honest" && strings.Contains(string(b), "<nil> notes") {
			t.Errorf("committed without the peer's evidence: %s", b)
		}
	}
	entries, err := front.del.ledger.List(t.Context(), 0)
	if err != nil || len(entries) != 1 || entries[0].Skill != "honest" || !strings.Contains(entries[0].DelegationID, "#honest-1") {
		t.Fatalf("ledger: %+v %v, want the honest delegation alone, keyed TASK#honest-1", entries, err)
	}
}
