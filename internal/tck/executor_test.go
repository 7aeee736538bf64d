package tck

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

func newExecCtx(msgID string) *a2asrv.ExecutorContext {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	msg.ID = msgID
	return &a2asrv.ExecutorContext{Message: msg, TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID()}
}

// everyScript lists an id for every script: each scripted prefix, the echo,
// and a follow-up on an existing task.
func everyScript() map[string]*a2asrv.ExecutorContext {
	out := map[string]*a2asrv.ExecutorContext{"echo": newExecCtx("anything")}
	for _, sc := range scenarios {
		out[sc.prefix] = newExecCtx(sc.prefix + "-1")
	}
	followUp := newExecCtx("tck-complete-task-2")
	followUp.StoredTask = &a2a.Task{ID: followUp.TaskID, ContextID: followUp.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}
	out["follow-up"] = followUp
	return out
}

// TestExecuteEvents runs every script to its end without a server: no
// errors, a Task first only for new tasks, and the execution's ids on every
// event (the bare message carries the context only).
func TestExecuteEvents(t *testing.T) {
	exec := New()
	exec.wait = func(context.Context, time.Duration) error { return nil }
	for name, execCtx := range everyScript() {
		t.Run(name, func(t *testing.T) {
			var events []a2a.Event
			for ev, err := range exec.Execute(t.Context(), execCtx) {
				if err != nil {
					t.Fatalf("error after %d events: %v", len(events), err)
				}
				events = append(events, ev)
			}
			if len(events) == 0 {
				t.Fatal("no events")
			}
			_, isTask := events[0].(*a2a.Task)
			wantTask := execCtx.StoredTask == nil && name != "tck-message-response"
			if isTask != wantTask {
				t.Errorf("first event %s, want a Task: %t", describe(events[0]), wantTask)
			}
			for _, ev := range events {
				want := execCtx.TaskInfo()
				if _, ok := ev.(*a2a.Message); ok {
					want.TaskID = ""
				}
				if got := ev.TaskInfo(); got != want {
					t.Errorf("%s ids = %+v, want %+v", describe(ev), got, want)
				}
			}
		})
	}
}

// TestExecuteStopsWhenConsumerStops breaks out after every possible event
// count. A range-over-func loop panics if the iterator yields again after
// the body broke out, so any script that ignores yield's false fails here.
func TestExecuteStopsWhenConsumerStops(t *testing.T) {
	exec := New()
	exec.wait = func(context.Context, time.Duration) error { return nil }
	for name, execCtx := range everyScript() {
		t.Run(name, func(t *testing.T) {
			total := 0
			for range exec.Execute(t.Context(), execCtx) {
				total++
			}
			for stopAt := 1; stopAt < total; stopAt++ {
				seen := 0
				for range exec.Execute(t.Context(), execCtx) {
					seen++
					if seen == stopAt {
						break
					}
				}
				if seen != stopAt {
					t.Errorf("stopping at %d: saw %d events", stopAt, seen)
				}
			}
		})
	}
}

// TestExecuteWithoutMessage checks the guard answers with an error and no
// event.
func TestExecuteWithoutMessage(t *testing.T) {
	execCtx := &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID()}
	var got []error
	for ev, err := range New().Execute(t.Context(), execCtx) {
		if ev != nil {
			t.Errorf("event %s, want none", describe(ev))
		}
		got = append(got, err)
	}
	if len(got) != 1 || !errors.Is(got[0], errNoMessage) {
		t.Errorf("errors = %v, want [%v]", got, errNoMessage)
	}
}

// TestResubscribeWaitHonoursCancel cancels the context once the script is
// working, with the real timer set to an hour: the script must end at once
// with the cancellation, never completing. The run is in a goroutine only so
// that a script stuck in its wait fails the test instead of hanging it.
func TestResubscribeWaitHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []string
	var last error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range New(WithResubscribeDelay(time.Hour)).Execute(ctx, newExecCtx("test-resubscribe-message-id-1")) {
			if err != nil {
				last = err
				continue
			}
			got = append(got, describe(ev))
			if st, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && st.Status.State == a2a.TaskStateWorking {
				cancel()
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("script still running after its context was canceled")
	}
	want := []string{taskEv(a2a.TaskStateSubmitted), statusEv(a2a.TaskStateWorking)}
	if !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if !errors.Is(last, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", last)
	}
}

// TestCancel checks Cancel emits exactly one canceled status for the task.
func TestCancel(t *testing.T) {
	execCtx := newExecCtx("x")
	execCtx.Message = nil // as a2asrv passes it for cancellation
	var events []a2a.Event
	for ev, err := range New().Cancel(t.Context(), execCtx) {
		if err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) != 1 {
		t.Fatalf("events = %d, want 1", len(events))
	}
	st, ok := events[0].(*a2a.TaskStatusUpdateEvent)
	if !ok || st.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("event = %s, want %s", describe(events[0]), statusEv(a2a.TaskStateCanceled))
	}
	if got := st.TaskInfo(); got != execCtx.TaskInfo() {
		t.Errorf("ids = %+v, want %+v", got, execCtx.TaskInfo())
	}
}
