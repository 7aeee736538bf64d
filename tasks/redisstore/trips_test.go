package redisstore_test

import (
	"context"
	"iter"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/tasks"
)

// doneExec completes every task at once, as the benchmark's executor.
type doneExec struct{}

func (doneExec) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (doneExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestRedisTripsPerSend counts the Redis round trips and commands of one
// blocking SendMessage on an engine over the Redis store, the replica
// paths (leases, the event tail) included, and bounds them so that a
// change that adds round trips to the hot path is seen.
func TestRedisTripsPerSend(t *testing.T) {
	url := redistest.ServerURL(t)
	s, _ := redistest.OpenStore(t, url)
	m := &meter{}
	s.Client().AddHook(m)
	e, err := tasks.NewEngine(t.Context(), s, doneExec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	send := func() {
		t.Helper()
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
		res, err := e.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("send answered %#v", res)
		}
	}
	send() // scripts loaded, connections dialled
	m.reset()
	const n = 50
	for range n {
		send()
	}
	trips, cmds := float64(m.trips.Load())/n, float64(m.cmds.Load())/n
	t.Logf("per blocking send: %.1f round trips, %.1f commands, %.0f bytes sent", trips, cmds, float64(m.bytes.Load())/n)
	if trips > 8 {
		t.Errorf("%.1f round trips per send, want at most 8", trips)
	}
}
