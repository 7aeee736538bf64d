package tasks_test

import (
	"context"
	"iter"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// quietExec opens a task, yields nothing for quiet, then completes it; as a
// QuietBound it asks for bound.
type quietExec struct {
	quiet, bound time.Duration
}

func (x quietExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		select {
		case <-time.After(x.quiet):
		case <-ctx.Done():
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (quietExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// patientExec is quietExec that says how long it may stay quiet.
type patientExec struct{ quietExec }

func (x patientExec) QuietFor(*a2asrv.ExecutorContext) time.Duration { return x.bound }

// TestQuietBound: an executor quiet for longer than the idle timeout fails
// "stopped answering", unless it is a QuietBound asking for longer (a
// delegation waiting on a peer that reports no progress, within its own
// deadline); past its own bound it fails all the same.
func TestQuietBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    a2asrv.AgentExecutor
		want a2a.TaskState
	}{
		{"no bound", quietExec{quiet: 400 * time.Millisecond}, a2a.TaskStateFailed},
		{"a longer bound", patientExec{quietExec{quiet: 400 * time.Millisecond, bound: 5 * time.Second}}, a2a.TaskStateCompleted},
		{"past its bound", patientExec{quietExec{quiet: 3 * time.Second, bound: 300 * time.Millisecond}}, a2a.TaskStateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := boltstore.Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			e, err := tasks.NewEngine(t.Context(), st, tc.x, tasks.WithIdleTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				e.Shutdown(ctx)
				st.Close()
			})
			res, err := e.SendMessage(t.Context(), send("hi"))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.(*a2a.Task).Status.State; got != tc.want {
				t.Fatalf("state %s, want %s", got, tc.want)
			}
		})
	}
}
