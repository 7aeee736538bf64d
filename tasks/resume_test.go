package tasks_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// resumer resumes tasks started with "wait": it reports working, waits for
// release and completes with what it was given back.
type resumer struct {
	scriptExec
	resumed chan a2a.TaskID
}

var _ tasks.Resumer = (*resumer)(nil)

func (x *resumer) CanResume(task *a2a.Task) bool {
	return len(task.History) > 0 && textOf(task.History[0]) == "wait"
}

func (x *resumer) Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.resumed <- ec.TaskID
		if ec.Message != nil || ec.StoredTask == nil || ec.StoredTask.ID != ec.TaskID {
			yield(nil, a2a.NewError(a2a.ErrInternalError, "resume without the stored task"))
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("taken up"))), nil) {
			return
		}
		select {
		case <-x.release:
		case <-ctx.Done():
			return
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("resumed: "+textOf(ec.StoredTask.History[0]))), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

// TestRestartResumesTasks: after the process "dies" (the store is closed
// under running tasks), a new engine resumes the tasks its executor can
// resume, through the ordinary run (subscribe, cancel), and fails the rest.
func TestRestartResumesTasks(t *testing.T) {
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	old := &scriptExec{release: make(chan struct{})}
	e, err := tasks.NewEngine(t.Context(), st, old)
	if err != nil {
		t.Fatal(err)
	}
	start := func(text string) a2a.TaskID {
		req := send(text)
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := e.SendMessage(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2a.Task).ID
	}
	followed, canceled, lost := start("wait"), start("wait"), start("hang")
	st.Close() // the process "dies": nothing more is written
	close(old.release)

	st2, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := &resumer{scriptExec: scriptExec{release: make(chan struct{})}, resumed: make(chan a2a.TaskID, 2)}
	e2, err := tasks.NewEngine(t.Context(), st2, x)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		e2.Shutdown(ctx)
		st2.Close()
	})

	got, err := e2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: lost})
	if err != nil || got.Status.State != a2a.TaskStateFailed || !strings.Contains(textOf(got.Status.Message), "restarted") {
		t.Fatalf("a task its executor cannot resume: %v %v", got, err)
	}
	ids := map[a2a.TaskID]bool{<-x.resumed: true, <-x.resumed: true}
	if !ids[followed] || !ids[canceled] {
		t.Fatalf("resumed %v, want %s and %s", ids, followed, canceled)
	}

	// The resumed run is live: a subscriber follows it to its end.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var evs []a2a.Event
	for ev, err := range e2.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: followed}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if len(evs) == 1 {
			if _, err := e2.CancelTask(ctx, &a2a.CancelTaskRequest{ID: canceled}); err != nil {
				t.Fatalf("cancel a resumed task: %v", err)
			}
			close(x.release)
		}
	}
	last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
	if !ok || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("subscription of the resumed task ended with %#v", evs[len(evs)-1])
	}
	got, err = e2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: followed})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || len(got.Artifacts) != 1 || got.Artifacts[0].Parts[0].Text() != "resumed: wait" {
		t.Fatalf("resumed task: %v %v", got, err)
	}
	got, err = e2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: canceled})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("canceled resumed task: %v %v", got, err)
	}
}

// leaver works on "wait" until its context ends, reports the cause, and
// then answers with a failure that must not be stored.
type leaver struct {
	resumer
	causes chan error
}

func (x *leaver) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	if textOf(ec.Message) != "wait" {
		return x.resumer.Execute(ctx, ec)
	}
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		<-ctx.Done()
		x.causes <- context.Cause(ctx)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, nil), nil)
	}
}

// TestShutdownLeavesResumableTasks: a shutdown that runs out of time stops
// a task its executor can resume with cause ErrShutdown and leaves it
// working, and the next start resumes it; another running task is failed.
func TestShutdownLeavesResumableTasks(t *testing.T) {
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := &leaver{resumer: resumer{scriptExec: scriptExec{release: make(chan struct{})}}, causes: make(chan error, 1)}
	e, err := tasks.NewEngine(t.Context(), st, x)
	if err != nil {
		t.Fatal(err)
	}
	start := func(text string) a2a.TaskID {
		req := send(text)
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		res, err := e.SendMessage(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2a.Task).ID
	}
	left, lost := start("wait"), start("hang")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := e.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown returned nil with tasks still running")
	}
	if cause := <-x.causes; !errors.Is(cause, tasks.ErrShutdown) {
		t.Fatalf("the left task's context ended with %v, want ErrShutdown", cause)
	}
	owner := tasks.Owner{Principal: tasks.AnonymousPrincipal}
	if snap, err := st.Get(t.Context(), owner, left); err != nil || snap.Task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("the resumable task after shutdown: %v %v", snap, err)
	}
	if snap, err := st.Get(t.Context(), owner, lost); err != nil || snap.Task.Status.State != a2a.TaskStateFailed ||
		!strings.Contains(textOf(snap.Task.Status.Message), "shut down") {
		t.Fatalf("the other task after shutdown: %v %v", snap, err)
	}
	st.Close()

	y := &resumer{scriptExec: scriptExec{release: make(chan struct{})}, resumed: make(chan a2a.TaskID, 1)}
	_, e2 := openEngine(t, dir, y)
	if id := <-y.resumed; id != left {
		t.Fatalf("resumed %s, want %s", id, left)
	}
	first := true
	for _, err := range e2.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: left}) {
		if err != nil {
			t.Fatal(err)
		}
		if first {
			close(y.release)
			first = false
		}
	}
	got, err := e2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: left})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the left task after the restart: %v %v", got, err)
	}
}
