package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// fullStore refuses appends to a task already stored with
// [tasks.ErrStoreFull] while full is set, as a store on a disk that filled
// between a task's first write and its next does. A real full disk cannot be
// made to fill at that point on demand (e2e TestStoreDiskFull sees it about
// once in 40 runs), so this test puts the refusal there.
type fullStore struct {
	*boltstore.Store
	mu       sync.Mutex
	full     bool
	refused  int
	refusedC chan struct{} // closed at the first refusal
}

func (s *fullStore) Append(ctx context.Context, next *tasks.Snapshot, events []a2a.Event) error {
	s.mu.Lock()
	if s.full && next.Version > uint64(len(events)) { // not the task's first write
		s.refused++
		if s.refused == 1 {
			close(s.refusedC)
		}
		s.mu.Unlock()
		return fmt.Errorf("append to task %s: apply: no space left on device (%w)", next.Task.ID, tasks.ErrStoreFull)
	}
	s.mu.Unlock()
	return s.Store.Append(ctx, next, events)
}

// fullEngine is an engine on a fullStore over a real bbolt store.
func fullEngine(t *testing.T) (*tasks.Engine, *fullStore, *scriptExec) {
	t.Helper()
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st := &fullStore{Store: bolt, refusedC: make(chan struct{})}
	x := &scriptExec{release: make(chan struct{})}
	e, err := tasks.NewEngine(context.Background(), st, x)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		e.Shutdown(ctx)
		bolt.Close()
	})
	return e, st, x
}

// sendWaiting sends "wait" as a blocking send and waits for its task to
// be stored working: it returns the task's id and the send's answer.
func sendWaiting(t *testing.T, e *tasks.Engine) (a2a.TaskID, <-chan error) {
	t.Helper()
	sent := make(chan error, 1)
	go func() {
		_, err := e.SendMessage(context.Background(), send("wait"))
		sent <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		page, err := e.ListTasks(t.Context(), &a2a.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Tasks) > 0 && page.Tasks[0].Status.State == a2a.TaskStateWorking {
			return page.Tasks[0].ID, sent
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline
	}
	t.Fatal("the task did not start working")
	return "", nil
}

func (s *fullStore) setFull(full bool) {
	s.mu.Lock()
	s.full = full
	s.mu.Unlock()
}

// TestStoreFullKeepsTask: a task whose first write was stored and whose
// next write finds the store full is not left behind: a blocking send is
// told at once, naming the task and the state it was left in, and the task
// goes on to completion once the store takes writes again.
func TestStoreFullKeepsTask(t *testing.T) {
	e, st, x := fullEngine(t)
	id, sent := sendWaiting(t, e)
	var answer error
	st.setFull(true)
	close(x.release) // the artifact and completion now find the store full
	<-st.refusedC
	select {
	case answer = <-sent:
	case <-time.After(5 * time.Second):
		t.Fatal("the blocking send was not answered while the store was full")
	}
	var aerr *a2a.Error
	if !errors.As(answer, &aerr) || !errors.Is(answer, a2a.ErrInternalError) {
		t.Fatalf("blocking send on a full store: err = %v, want an internal error", answer)
	}
	for _, want := range []string{string(id), "full", "WORKING"} {
		if !strings.Contains(answer.Error(), want) {
			t.Errorf("error %q does not name %q", answer, want)
		}
	}
	got, err := e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("task while the store is full: %v, %v; want working", got, err)
	}

	st.setFull(false)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got, err = e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		if err == nil && got.Status.State == a2a.TaskStateCompleted {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	if err != nil || got.Status.State != a2a.TaskStateCompleted || len(got.Artifacts) != 1 {
		t.Fatalf("task after the store had room again: %+v, %v; want completed with its artifact", got, err)
	}
}

// TestStoreFullShutdown: a run waiting for a full store to take its events
// does not hold up a shutdown past its deadline; the task stays as stored.
func TestStoreFullShutdown(t *testing.T) {
	e, st, x := fullEngine(t)
	id := startWaiting(t, e).ID
	st.setFull(true)
	close(x.release)
	<-st.refusedC
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	e.Shutdown(ctx)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("shutdown took %v with a run waiting for a full store, want its 500ms deadline and little more", took)
	}
	got, err := st.Get(t.Context(), tasks.Owner{Principal: tasks.AnonymousPrincipal}, id)
	if err != nil || got.Task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("task after shutdown: %+v, %v; want it working, as stored", got, err)
	}
}
