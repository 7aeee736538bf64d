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
