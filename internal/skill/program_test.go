package skill

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/mcp"
)

// writer writes a note through its Caps, and answers what the call said.
type writer struct{}

func (writer) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		res, err := CapsFrom(ctx).Call(ctx, "notes__write_note", map[string]any{"name": "n2", "text": "from Go"})
		if err != nil {
			yield(nil, err)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, agentText(ec, string(res.Outcome)+": "+res.Text)), nil)
	}
}

func (writer) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

// TestProgramWaitsForTheApproval: a program's call that needs an approval
// leaves its task input-required with the request; the approver's answer
// runs the executor again and the call goes through.
func TestProgramWaitsForTheApproval(t *testing.T) {
	tools := startNotes(t)
	g := NewProgram("s", writer{}, &tools, nil, nil)
	ec := &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), User: caller("alice"),
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("write"))}
	evs := run(t, g, ec)
	if _, ok := evs[0].(*a2a.Task); !ok {
		t.Fatalf("first event %T, want the submitted task", evs[0])
	}
	st, msg := last(evs)
	if st != a2a.TaskStateInputRequired {
		t.Fatalf("ended %s, want input-required", st)
	}
	req := approvalRequest(t, msg)
	if req["tool"] != "notes__write_note" {
		t.Fatalf("approval request %v, want one for notes__write_note", req)
	}
	ec.StoredTask = &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}
	ec.Message = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{ApprovalKey: req}))
	ec.User = caller("key:ops")
	if st, msg := last(run(t, g, ec)); st != a2a.TaskStateCompleted || messageText(msg) != "success: saved n2" {
		t.Fatalf("after the approval: %s %q, want completed with success: saved n2", st, messageText(msg))
	}
}

// TestCapsOutsideAProgram: outside a Program's Execute, or without tools or
// peers, the capabilities say so.
func TestCapsOutsideAProgram(t *testing.T) {
	c := CapsFrom(t.Context())
	if c != nil {
		t.Fatalf("CapsFrom a bare context = %v", c)
	}
	if _, err := c.Call(t.Context(), "notes__read_note", nil); !errors.Is(err, ErrNoTools) {
		t.Errorf("Call: %v, want ErrNoTools", err)
	}
	if c.Snapshot() != nil {
		t.Error("a snapshot outside a program")
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
	if _, err := c.Delegate(t.Context(), "pay", msg); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("Delegate: %v, want ErrNoDelegation", err)
	}
	bare := &Caps{}
	if _, err := bare.Call(t.Context(), "notes__read_note", nil); !errors.Is(err, ErrNoTools) {
		t.Errorf("Call without tools: %v, want ErrNoTools", err)
	}
	if _, err := bare.Delegate(t.Context(), "pay", msg); !errors.Is(err, ErrNoDelegation) {
		t.Errorf("Delegate without peers: %v, want ErrNoDelegation", err)
	}
	if err := error(&ApprovalRequiredError{Request: &mcp.ApprovalRequest{Tool: "t"}}); !errors.Is(err, ErrApprovalRequired) {
		t.Errorf("%v does not wrap ErrApprovalRequired", err)
	}
}

// TestTaskOfDelegation: a delegate skill's delegation is its task's; a
// program's (TASK#SKILL-N) is the task that made it.
func TestTaskOfDelegation(t *testing.T) {
	for id, want := range map[string]a2a.TaskID{"t1": "t1", "t1#pay-2": "t1", "": ""} {
		if got := TaskOfDelegation(id); got != want {
			t.Errorf("TaskOfDelegation(%q) = %q, want %q", id, got, want)
		}
	}
}
