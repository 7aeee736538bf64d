package skill

import (
	"context"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
)

// MetadataKey is the message metadata key a client may set to the id of
// the skill it wants; without it the agent's first skill answers. A task
// keeps its skill's id under it in its own metadata.
const MetadataKey = "handoff/skill"

// Router is the engine's one executor: it hands each task to the executor
// of the skill the message names, and passes on what the engine asks of
// executors (redaction, approvals, quiet bounds, resumption) to the
// executors that do it.
type Router struct {
	bySkill map[string]a2asrv.AgentExecutor
	first   string // the default skill's id
}

var (
	_ a2asrv.AgentExecutor = (*Router)(nil)
	_ tasks.Resumer        = (*Router)(nil)
	_ tasks.QuietBound     = (*Router)(nil)
	_ tasks.Redactor       = (*Router)(nil)
	_ tasks.ApprovalReader = (*Router)(nil)
)

// NewRouter returns a Router with no skills; [Router.Add] gives it some.
func NewRouter() *Router {
	return &Router{bySkill: make(map[string]a2asrv.AgentExecutor)}
}

// Add runs the skill id with x. The first skill added answers the messages
// that name none. Add every skill before the engine starts.
func (r *Router) Add(id string, x a2asrv.AgentExecutor) {
	r.bySkill[id] = x
	if r.first == "" {
		r.first = id
	}
}

// pick chooses by the skill a task was started with (kept in its metadata),
// then by the message's skill metadata, then the first skill.
func (r *Router) pick(ec *a2asrv.ExecutorContext) (string, a2asrv.AgentExecutor, error) {
	var id string
	if ec.StoredTask != nil {
		id, _ = ec.StoredTask.Metadata[MetadataKey].(string)
	}
	if id == "" && ec.Message != nil {
		id, _ = ec.Message.Metadata[MetadataKey].(string)
	}
	if id == "" {
		id = r.first
	}
	x, ok := r.bySkill[id]
	if !ok {
		return "", nil, a2a.NewError(a2a.ErrInvalidParams, "this agent has no skill "+id)
	}
	return id, x, nil
}

// Execute implements [a2asrv.AgentExecutor]. A new task records its skill in
// its metadata, so that later messages on it reach the same skill.
func (r *Router) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	id, x, err := r.pick(ec)
	if err != nil {
		return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
	}
	if ec.StoredTask != nil {
		return x.Execute(ctx, ec)
	}
	return func(yield func(a2a.Event, error) bool) {
		for ev, err := range x.Execute(ctx, ec) {
			if t, ok := ev.(*a2a.Task); ok && err == nil {
				t.SetMeta(MetadataKey, id)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// Redact implements [tasks.Redactor] by the skill the message goes to.
func (r *Router) Redact(ctx context.Context, ec *a2asrv.ExecutorContext) (*a2a.Message, error) {
	_, x, err := r.pick(ec)
	if err != nil {
		return ec.Message, nil // Execute refuses the message, with this error
	}
	if rd, ok := x.(tasks.Redactor); ok {
		return rd.Redact(ctx, ec)
	}
	return ec.Message, nil
}

// Approval implements [tasks.ApprovalReader] by the skill the task was
// started with; a skill that takes no approvals has none.
func (r *Router) Approval(ctx context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	_, x, err := r.pick(ec)
	if err != nil {
		return nil
	}
	if ar, ok := x.(tasks.ApprovalReader); ok {
		return ar.Approval(ctx, ec)
	}
	return nil
}

// QuietFor implements [tasks.QuietBound] by the skill the message goes to.
func (r *Router) QuietFor(ec *a2asrv.ExecutorContext) time.Duration {
	_, x, err := r.pick(ec)
	if err != nil {
		return 0
	}
	if q, ok := x.(tasks.QuietBound); ok {
		return q.QuietFor(ec)
	}
	return 0
}

// Cancel implements [a2asrv.AgentExecutor].
func (r *Router) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	_, x, err := r.pick(ec)
	if err != nil {
		return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
	}
	return x.Cancel(ctx, ec)
}

// resumer returns the executor of the skill a task was started with when
// that executor can take up its unfinished tasks after a restart.
func (r *Router) resumer(task *a2a.Task) (tasks.Resumer, bool) {
	id, _ := task.Metadata[MetadataKey].(string)
	x, ok := r.bySkill[id].(tasks.Resumer)
	return x, ok
}

// CanResume implements [tasks.Resumer] for the skills that can resume.
func (r *Router) CanResume(task *a2a.Task) bool {
	x, ok := r.resumer(task)
	return ok && x.CanResume(task)
}

// Resume implements [tasks.Resumer], by the skill stored with the task.
func (r *Router) Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x, ok := r.resumer(ec.StoredTask)
	if !ok {
		return func(yield func(a2a.Event, error) bool) {
			yield(nil, a2a.NewError(a2a.ErrInternalError, "the task's skill cannot resume"))
		}
	}
	return x.Resume(ctx, ec)
}
