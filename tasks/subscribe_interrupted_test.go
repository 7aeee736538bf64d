package tasks_test

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestSubscribeToInterruptedTask: a subscribe to a task that waits for
// input keeps the stream open (an interrupted task is not terminal, A2A 1.0
// 3.1.6), through another input-required turn, and ends it when the task
// reaches a terminal state: on one engine, and on two replicas where the
// turns are taken by the replica the subscriber is not on.
func TestSubscribeToInterruptedTask(t *testing.T) {
	t.Run("one engine", func(t *testing.T) {
		e, _, _ := newEngine(t, t.TempDir(), tasks.WithCapabilities(a2a.AgentCapabilities{Streaming: true}))
		subscribeAcrossTurns(t, e, e)
	})
	t.Run("replicas", func(t *testing.T) {
		es, _, _ := replicas(t, 2, tasks.WithCapabilities(a2a.AgentCapabilities{Streaming: true}))
		subscribeAcrossTurns(t, es[0], es[1])
	})
}

// subscribeAcrossTurns subscribes on sub to a task that other runs.
func subscribeAcrossTurns(t *testing.T, sub, other *tasks.Engine) {
	res, err := other.SendMessage(t.Context(), send("ask"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("state %s, want input-required", task.Status.State)
	}
	e := sub

	events := make(chan a2a.Event, 64)
	ended := make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range e.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: task.ID}) {
			if err != nil {
				ended <- err
				return
			}
			events <- ev
		}
		ended <- nil
	}()
	next := func(what string) a2a.Event {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("%s: the stream ended (%v)", what, <-ended)
			}
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no event", what)
		}
		return nil
	}
	if first, ok := next("first").(*a2a.Task); !ok || first.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("first event %#v, want the input-required task", first)
	}
	// Nothing more comes while the task waits, and the stream stays open.
	select {
	case ev, ok := <-events:
		t.Fatalf("while the task waits: event %#v (open %t), want none", ev, ok)
	case <-time.After(200 * time.Millisecond):
	}

	reply := func(text string) {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		m.TaskID, m.ContextID = task.ID, task.ContextID
		if _, err := other.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	stateOf := func(ev a2a.Event) a2a.TaskState {
		if s, ok := ev.(*a2a.TaskStatusUpdateEvent); ok {
			return s.Status.State
		}
		return ""
	}
	reply("ask") // another turn that waits for input
	for state := a2a.TaskState(""); state != a2a.TaskStateInputRequired; {
		state = stateOf(next("second turn"))
	}
	reply("done")
	for state := a2a.TaskState(""); state != a2a.TaskStateCompleted; {
		state = stateOf(next("last turn"))
	}
	select {
	case _, ok := <-events:
		if ok {
			t.Fatal("an event after the terminal one")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end at the terminal state")
	}
	if err := <-ended; err != nil {
		t.Fatalf("the stream ended with %v", err)
	}
}
