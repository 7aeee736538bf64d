package tasks_test

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// BenchmarkFanOut streams one task's events to 1 and 100 subscribers: the
// cost per event delivered to every subscriber.
func BenchmarkFanOut(b *testing.B) {
	for _, subs := range []int{1, 100} {
		b.Run(fmt.Sprintf("subscribers-%d", subs), func(b *testing.B) {
			e, x, _ := newEngine(b, b.TempDir())
			b.ReportAllocs()
			for range b.N {
				req := send("wait")
				req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
				res, err := e.SendMessage(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				id := res.(*a2a.Task).ID
				var wg sync.WaitGroup
				ready := make(chan struct{}, subs)
				for range subs {
					wg.Go(func() {
						first := true
						for _, err := range e.SubscribeToTask(context.Background(), &a2a.SubscribeToTaskRequest{ID: id}) {
							if err != nil {
								b.Error(err)
								return
							}
							if first {
								ready <- struct{}{}
								first = false
							}
						}
					})
				}
				for range subs {
					<-ready
				}
				x.release <- struct{}{}
				wg.Wait()
			}
		})
	}
}

// BenchmarkHeapPerStoredTask completes tasks with a one-message history
// and reports the engine's live heap per stored task (heap_B/task): the
// engine keeps no finished task in memory, they live in the store.
func BenchmarkHeapPerStoredTask(b *testing.B) {
	e, _, _ := newEngine(b, b.TempDir())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range b.N {
		if _, err := e.SendMessage(context.Background(), send("hi")); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heap_B/task")
}

// manyEvents yields n artifact updates before completing.
type manyEvents struct{ n int }

func (m manyEvents) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		for range m.n {
			if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("x")), nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (manyEvents) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// BenchmarkEventOverhead runs tasks of 100 events each and reports the
// allocations per event: allocs/event counts everything, the executor's own
// allocations (making the events) included; executor-allocs/event is the
// same executor drained without the engine, in the same run, as the
// baseline; engine-allocs/event is the difference: what the engine does
// with an event (apply, queue, JSON encoding for the store, the bbolt
// write, publish).
func BenchmarkEventOverhead(b *testing.B) {
	const perTask = 100
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e, err := tasks.NewEngine(context.Background(), st, manyEvents{n: perTask})
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		if _, err := e.SendMessage(context.Background(), send("go")); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	events := float64(b.N * (perTask + 2))
	total := float64(after.Mallocs-before.Mallocs) / events

	// The baseline: the executor alone, given what the engine gives it.
	runtime.ReadMemStats(&before)
	for range b.N {
		msg := send("go").Message
		ec := &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Message: msg}
		n := 0
		for _, err := range (manyEvents{n: perTask}).Execute(context.Background(), ec) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != perTask+2 {
			b.Fatalf("the executor yielded %d events, want %d", n, perTask+2)
		}
	}
	runtime.ReadMemStats(&after)
	own := float64(after.Mallocs-before.Mallocs) / events
	b.ReportMetric(total, "allocs/event")
	b.ReportMetric(own, "executor-allocs/event")
	b.ReportMetric(total-own, "engine-allocs/event")
}
