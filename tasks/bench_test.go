package tasks_test

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
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

// countingStore counts the writes an engine makes: each is a transaction
// of its own or a share of a group commit, and fewer per send leave more
// room in every fsync.
type countingStore struct {
	*boltstore.Store
	appends atomic.Int64
}

func (s *countingStore) Append(ctx context.Context, next *tasks.Snapshot, events []a2a.Event) error {
	s.appends.Add(1)
	return s.Store.Append(ctx, next, events)
}

func benchSend(b *testing.B, h a2asrv.RequestHandler) {
	b.ReportAllocs()
	b.SetParallelism(8) // 16 senders on 2 cores: requests overlap, as under load
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := h.SendMessage(context.Background(), send("bench"))
			if err != nil {
				b.Fatal(err)
			}
			if res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
				b.Fatal("not completed")
			}
		}
	})
}

func newBenchEngine(b *testing.B) (*tasks.Engine, *countingStore) {
	bolt, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	st := &countingStore{Store: bolt}
	e, err := tasks.NewEngine(context.Background(), st, doneExec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return e, st
}

// BenchmarkSendMessage is a blocking SendMessage through Handoff's engine on
// its durable bbolt store, and through a2a-go's own handler on its in-memory
// store, with the same executor.
func BenchmarkSendMessage(b *testing.B) {
	b.Run("engine-bolt", func(b *testing.B) {
		e, st := newBenchEngine(b)
		benchSend(b, e)
		b.ReportMetric(float64(st.appends.Load())/float64(b.N), "appends/op")
	})
	b.Run("sdk-inmemory", func(b *testing.B) { benchSend(b, a2asrv.NewHandler(doneExec{})) })
}

// BenchmarkSendMessageRatio measures both sides in each iteration (a fixed
// number of sends from 16 goroutines) and reports how many times faster the
// engine is (x_sdk): above 1 means faster than the SDK, although every task
// of the engine is fsynced to disk. testing.Benchmark cannot be nested in a
// benchmark, hence the manual timing.
func BenchmarkSendMessageRatio(b *testing.B) {
	const sends, senders = 4000, 16
	engine, _ := newBenchEngine(b)
	sdk := a2asrv.NewHandler(doneExec{})
	measure := func(h a2asrv.RequestHandler) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range senders {
			wg.Go(func() {
				for range sends / senders {
					if _, err := h.SendMessage(context.Background(), send("bench")); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var te, ts time.Duration
	for range b.N {
		te += measure(engine)
		ts += measure(sdk)
	}
	b.ReportMetric(float64(ts)/float64(te), "x_sdk")
	b.ReportMetric(float64(sends*b.N)/te.Seconds(), "engine_sends/s")
	b.ReportMetric(float64(sends*b.N)/ts.Seconds(), "sdk_sends/s")
}

// BenchmarkBoltGet reads tasks with a 1 KiB message in their history from
// the embedded store. "same" reads one task again and again: after the first
// read its snapshot comes from the store's decoded cache, checked against the
// stored bytes. "many" reads 20,000 tasks in turn, about 28 MB of records
// against a 4 MiB cache: most reads decode.
func BenchmarkBoltGet(b *testing.B) {
	owner := tasks.Owner{Principal: "bench"}
	open := func(b *testing.B, n int) (*boltstore.Store, []a2a.TaskID) {
		st, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		ids := make([]a2a.TaskID, n)
		var wg sync.WaitGroup
		const writers = 64
		for w := range writers {
			wg.Go(func() {
				for i := w; i < n; i += writers {
					ids[i] = a2a.TaskID(fmt.Sprintf("t%d", i))
					task := &a2a.Task{ID: ids[i], ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
						History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", 1024)))}}
					snap := &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Now()}
					if err := st.Append(context.Background(), snap, []a2a.Event{task}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return st, ids
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"same", 1}, {"many", 20000}} {
		b.Run(c.name, func(b *testing.B) {
			st, ids := open(b, c.n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := st.Get(context.Background(), owner, ids[i%len(ids)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
