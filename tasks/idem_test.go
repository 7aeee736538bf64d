package tasks_test

import (
	"context"
	"iter"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
)

// countingExec counts the executions scriptExec starts.
type countingExec struct {
	*scriptExec
	runs atomic.Int32
}

func (x *countingExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.runs.Add(1)
	return x.scriptExec.Execute(ctx, ec)
}

func keyedSend(text, key, tenant string) *a2a.SendMessageRequest {
	req := send(text)
	req.Tenant = tenant
	req.Message.Metadata = map[string]any{"key": key}
	return req
}

func metadataKey(m *a2a.Message) string {
	k, _ := m.Metadata["key"].(string)
	return k
}

// TestIdempotencyKey: repeats of one caller's key, blocking, streaming and
// concurrent, all get the one task its first message started; another
// caller's same key starts its own; the key still holds after a restart.
func TestIdempotencyKey(t *testing.T) {
	dir := t.TempDir()
	x := &countingExec{scriptExec: &scriptExec{release: make(chan struct{})}}
	st2, e2 := openEngine(t, dir, x, tasks.WithIdempotencyKey(metadataKey))

	first := keyedSend("wait", "k1", "")
	first.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e2.SendMessage(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID

	// A repeat by stream, while the task runs: the task, then its events to the end.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	streamed := make(chan []a2a.Event, 1)
	gotTask := make(chan struct{})
	go func() {
		var evs []a2a.Event
		for ev, err := range e2.SendStreamingMessage(ctx, keyedSend("wait", "k1", "")) {
			if err != nil {
				t.Error(err)
				break
			}
			if len(evs) == 0 {
				close(gotTask)
			}
			evs = append(evs, ev)
		}
		streamed <- evs
	}()
	<-gotTask

	// Concurrent blocking repeats wait for the one task.
	var wg sync.WaitGroup
	results := make([]*a2a.Task, 8)
	for i := range results {
		wg.Go(func() {
			res, err := e2.SendMessage(ctx, keyedSend("wait", "k1", ""))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res.(*a2a.Task)
		})
	}
	close(x.release)
	wg.Wait()
	for i, r := range results {
		if r == nil || r.ID != id || r.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("repeat %d: %v, want task %s completed", i, r, id)
		}
	}
	evs := <-streamed
	if tk, ok := evs[0].(*a2a.Task); !ok || tk.ID != id {
		t.Fatalf("streamed repeat opened with %#v", evs[0])
	}
	if last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent); !ok || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("streamed repeat ended with %#v", evs[len(evs)-1])
	}

	// A finished task's repeat: the task as it ended, by stream too.
	evs = nil
	for ev, err := range e2.SendStreamingMessage(ctx, keyedSend("wait", "k1", "")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 1 || evs[0].(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("stream repeat of a finished task: %v", evs)
	}
	if n := x.runs.Load(); n != 1 {
		t.Fatalf("%d executions for one key, want 1", n)
	}

	// Another caller's key is its own.
	res, err = e2.SendMessage(ctx, keyedSend("hello", "k1", "other-tenant"))
	if err != nil || res.(*a2a.Task).ID == id {
		t.Fatalf("another caller's same key: %v %v", res, err)
	}
	// Without a key every message starts a task.
	res, err = e2.SendMessage(ctx, send("hello"))
	if err != nil || res.(*a2a.Task).ID == id {
		t.Fatalf("no key: %v %v", res, err)
	}

	// After a restart the store still knows the key's task.
	shutdown(e2)
	st2.Close()
	y := &countingExec{scriptExec: &scriptExec{release: make(chan struct{})}}
	_, e3 := openEngine(t, dir, y, tasks.WithIdempotencyKey(metadataKey))
	res, err = e3.SendMessage(ctx, keyedSend("wait", "k1", ""))
	if err != nil || res.(*a2a.Task).ID != id || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted || y.runs.Load() != 0 {
		t.Fatalf("repeat after restart: %v %v (%d executions)", res, err, y.runs.Load())
	}
}

func shutdown(e *tasks.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.Shutdown(ctx)
}

// openEngine is newEngine with the executor given.
func openEngine(t *testing.T, dir string, x a2asrv.AgentExecutor, opts ...tasks.Option) (*tasks.BoltStore, *tasks.Engine) {
	t.Helper()
	st, err := tasks.OpenBolt(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, err := tasks.NewEngine(t.Context(), st, x, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		shutdown(e)
		st.Close()
	})
	return st, e
}
