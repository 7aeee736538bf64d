package tasks_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestDeletePushConfigIdempotent: deleting a config that is already gone
// succeeds (A2A 1.0, 3.1.10), while a task that does not exist, or is
// another caller's, still answers TaskNotFound.
func TestDeletePushConfigIdempotent(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir(), tasks.WithCapabilities(a2a.AgentCapabilities{PushNotifications: true}),
		tasks.WithPushURLCheck(func(context.Context, string) error { return nil }))
	alice := asUser(t.Context(), "alice")
	res, err := e.SendMessage(alice, send("hi"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	if _, err := e.CreateTaskPushConfig(alice, &a2a.PushConfig{TaskID: id, ID: "c1", URL: "https://hooks.example/1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := e.DeleteTaskPushConfig(alice, &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "c1"}); err != nil {
			t.Fatalf("delete #%d: %v, want success", i+1, err)
		}
	}
	if err := e.DeleteTaskPushConfig(alice, &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "never-made"}); err != nil {
		t.Fatalf("delete of a config never made: %v, want success", err)
	}
	for name, ctx := range map[string]context.Context{"unknown task": alice, "another's task": asUser(t.Context(), "mallory")} {
		task := id
		if name == "unknown task" {
			task = "no-such-task"
		}
		if err := e.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task, ID: "c1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("%s: %v, want TaskNotFound", name, err)
		}
	}
}
