package skill

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// named completes every task with its own name as the status text, and
// waits quiet as long as its name's length in minutes.
type named string

func (n named) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, agentText(ec, string(n))), nil)
	}
}

func (n named) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, agentText(ec, string(n))), nil)
	}
}

func (n named) QuietFor(*a2asrv.ExecutorContext) time.Duration {
	return time.Duration(len(n)) * time.Minute
}

func newEC(skill string) *a2asrv.ExecutorContext {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	if skill != "" {
		m.Metadata = map[string]any{MetadataKey: skill}
	}
	return &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Message: m}
}

// TestRouterPicksTheSkill: the message's skill, else the first added; a new
// task keeps its skill in its metadata, and a stored task's skill wins over
// what a later message names.
func TestRouterPicksTheSkill(t *testing.T) {
	r := NewRouter()
	r.Add("a", named("a"))
	r.Add("bb", named("bb"))
	for skill, want := range map[string]string{"": "a", "a": "a", "bb": "bb"} {
		evs := run(t, r, newEC(skill))
		task, ok := evs[0].(*a2a.Task)
		if !ok || task.Metadata[MetadataKey] != want {
			t.Errorf("skill %q: first event %#v, want a task whose metadata names %s", skill, evs[0], want)
		}
		if _, msg := last(evs); messageText(msg) != want {
			t.Errorf("skill %q: answered by %q, want %s", skill, messageText(msg), want)
		}
	}
	later := newEC("a")
	later.StoredTask = &a2a.Task{ID: later.TaskID, Metadata: map[string]any{MetadataKey: "bb"}}
	if _, msg := last(run(t, r, later)); messageText(msg) != "bb" {
		t.Errorf("a message on a bb task went to %q", messageText(msg))
	}
	if got := r.QuietFor(newEC("bb")); got != 2*time.Minute {
		t.Errorf("QuietFor(bb) = %s, want bb's 2m", got)
	}
	for ev := range r.Cancel(t.Context(), later) {
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); !ok || messageText(u.Status.Message) != "bb" {
			t.Errorf("Cancel of a bb task: %#v", ev)
		}
	}
}

// TestRouterUnknownSkill: a message naming no skill of the agent is refused
// as invalid params before any event, and nothing else is asked of it.
func TestRouterUnknownSkill(t *testing.T) {
	r := NewRouter()
	r.Add("a", named("a"))
	ec := newEC("zzz")
	for ev, err := range r.Execute(t.Context(), ec) {
		if ev != nil || !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("Execute = %v, %v; want only ErrInvalidParams", ev, err)
		}
	}
	if m, err := r.Redact(t.Context(), ec); err != nil || m != ec.Message {
		t.Errorf("Redact = %v, %v; want the message as it is", m, err)
	}
	if r.QuietFor(ec) != 0 || r.Approval(t.Context(), ec) != nil {
		t.Error("an unknown skill has a quiet bound or an approval")
	}
	task := &a2a.Task{ID: ec.TaskID, Metadata: map[string]any{MetadataKey: "a"}}
	if r.CanResume(task) {
		t.Error("a skill that cannot resume can")
	}
}
