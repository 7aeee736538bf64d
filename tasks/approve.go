package tasks

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// An ApprovalReader is an executor whose tasks may wait for an approval that
// a caller other than their owner gives ([WithApprovers]). On another's task
// an approver may send an approval and nothing else: the engine asks
// Approval what a message decides, refuses any message that decides nothing
// as TaskNotFound, and keeps only the decision, in the owner's history and in
// what the executor gets. The approver gets back the approval's outcome, the
// task's id and status, not its history or artifacts.
type ApprovalReader interface {
	// Approval returns the approval decision ec.Message carries for the task
	// in ec.StoredTask, as a message holding that decision only, or nil when
	// the message answers no approval request. It must not change ec.Message.
	Approval(ctx context.Context, ec *a2asrv.ExecutorContext) *a2a.Message
}

// approvalIn is the decision alone of an approver's message msg on task,
// with msg's ids, or nil when msg is no approval (or the executor takes none).
func (e *Engine) approvalIn(ctx context.Context, ec *a2asrv.ExecutorContext, task *a2a.Task, msg *a2a.Message) *a2a.Message {
	ar, ok := e.exec.(ApprovalReader)
	if !ok {
		return nil
	}
	probe := *ec
	probe.StoredTask, probe.Message, probe.TaskID, probe.ContextID = task, msg, task.ID, task.ContextID
	d := ar.Approval(ctx, &probe)
	if d == nil || len(d.Parts) == 0 {
		return nil
	}
	kept := *d
	kept.ID, kept.TaskID, kept.ContextID, kept.Role = msg.ID, task.ID, task.ContextID, msg.Role
	return &kept
}

// outcome is what an approver sees of the task it answered: its id and
// status, nothing of its history, artifacts or metadata.
func outcome(res a2a.SendMessageResult) a2a.SendMessageResult {
	t, ok := res.(*a2a.Task)
	if !ok {
		return res
	}
	return &a2a.Task{ID: t.ID, ContextID: t.ContextID, Status: t.Status}
}
