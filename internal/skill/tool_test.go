package skill

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/mcp"
)

// startNotes runs examples/mcpserver over stdio behind a Manager and a
// Pipeline whose contracts make read_note free and write_note need an
// approval from "key:ops", with its text redacted.
func startNotes(t *testing.T) MCP {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("build the example MCP server: %v\n%s", err, out)
	}
	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "notes", Transport: mcp.TransportStdio, Command: bin}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	audit, err := mcp.OpenBoltAudit(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	p, err := mcp.NewPipeline(m, []mcp.Contract{
		{Tool: "notes__read_note", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone},
		{Tool: "notes__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskHigh, Approval: mcp.ApprovalMandatory, Redact: []string{"text"}},
	}, audit, mcp.WithApprovers(func(p string) bool { return p == "key:ops" }))
	if err != nil {
		t.Fatal(err)
	}
	return MCP{Manager: m, Pipeline: p}
}

// run collects what x.Execute yields for ec, failing on an error.
func run(t *testing.T, x a2asrv.AgentExecutor, ec *a2asrv.ExecutorContext) []a2a.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var evs []a2a.Event
	for ev, err := range x.Execute(ctx, ec) {
		if err != nil {
			t.Fatalf("after %d events: %v", len(evs), err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// last is the state of the last status event (or task) of evs.
func last(evs []a2a.Event) (a2a.TaskState, *a2a.Message) {
	for _, ev := range slices.Backward(evs) {
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			return e.Status.State, e.Status.Message
		case *a2a.Task:
			return e.Status.State, e.Status.Message
		}
	}
	return "", nil
}

func caller(name string) *a2asrv.User { return &a2asrv.User{Name: name, Authenticated: true} }

// approvalRequest is the approval_request object of an input-required
// status message.
func approvalRequest(t *testing.T, m *a2a.Message) map[string]any {
	t.Helper()
	for _, p := range m.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			if r, ok := d[ApprovalRequestKey].(map[string]any); ok {
				return r
			}
		}
	}
	t.Fatalf("no %s in %v", ApprovalRequestKey, m)
	return nil
}

// TestToolRunsAfterTheApproval: a write waits input-required with the
// approval request, and an approver's answer to it runs the same call.
func TestToolRunsAfterTheApproval(t *testing.T) {
	tools := startNotes(t)
	write := NewTool("s", "notes__write_note", tools)
	ec := &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), User: caller("alice"),
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"name": "n1", "text": "the secret"}))}

	kept, err := write.Redact(t.Context(), ec)
	if err != nil {
		t.Fatal(err)
	}
	if d := kept.Parts[0].Data().(map[string]any); d["text"] != mcp.Redacted || d["name"] != "n1" {
		t.Fatalf("stored message's data = %v, want text redacted and name kept", d)
	}

	evs := run(t, write, ec)
	if _, ok := evs[0].(*a2a.Task); !ok {
		t.Fatalf("first event %T, want the submitted task", evs[0])
	}
	st, msg := last(evs)
	if st != a2a.TaskStateInputRequired {
		t.Fatalf("write ended %s, want input-required", st)
	}
	req := approvalRequest(t, msg)

	answer := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{ApprovalKey: req}))
	approved := &a2asrv.ExecutorContext{TaskID: ec.TaskID, ContextID: ec.ContextID, User: caller("key:ops"), Message: answer,
		StoredTask: &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}}
	if got := write.Approval(t.Context(), approved); got == nil {
		t.Fatal("Approval read no decision from the approver's message")
	}
	evs = run(t, write, approved)
	if st, msg := last(evs); st != a2a.TaskStateCompleted {
		t.Fatalf("approved write ended %s (%v), want completed", st, msg)
	}

	read := NewTool("s", "notes__read_note", tools)
	evs = run(t, read, &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), User: caller("alice"),
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("n1"))}) // one string parameter: the text is it
	var text string
	for _, ev := range evs {
		if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
			text = a.Artifact.Parts[0].Text()
		}
	}
	if st, _ := last(evs); st != a2a.TaskStateCompleted || text != "the secret" {
		t.Fatalf("read ended %s with %q, want completed with the note written", st, text)
	}
}

// TestToolApprovalFromAnotherCaller: an answer from a caller who is not an
// approver runs nothing.
func TestToolApprovalFromAnotherCaller(t *testing.T) {
	write := NewTool("s", "notes__write_note", startNotes(t))
	ec := &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), User: caller("alice"),
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"name": "n1", "text": "x"}))}
	_, msg := last(run(t, write, ec))
	req := approvalRequest(t, msg)
	ec.StoredTask = &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}
	ec.Message = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{ApprovalKey: req}))
	if st, msg := last(run(t, write, ec)); st == a2a.TaskStateCompleted {
		t.Fatalf("alice approved her own write: %s %v", st, msg)
	}
}
