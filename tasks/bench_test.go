package tasks_test

import (
	"context"
	"iter"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

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

func newBenchEngine(b *testing.B) *tasks.Engine {
	st, err := tasks.OpenBolt(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	e, err := tasks.NewEngine(context.Background(), st, doneExec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return e
}

// BenchmarkSendMessage is a blocking SendMessage through Handoff's engine on
// its durable bbolt store, and through a2a-go's own handler on its in-memory
// store, with the same executor.
func BenchmarkSendMessage(b *testing.B) {
	b.Run("engine-bolt", func(b *testing.B) { benchSend(b, newBenchEngine(b)) })
	b.Run("sdk-inmemory", func(b *testing.B) { benchSend(b, a2asrv.NewHandler(doneExec{})) })
}

// BenchmarkSendMessageRatio measures both sides in each iteration (a fixed
// number of sends from 16 goroutines) and reports how many times faster the
// engine is (x_sdk): above 1 means faster than the SDK, although every task
// of the engine is fsynced to disk. testing.Benchmark cannot be nested in a
// benchmark, hence the manual timing.
func BenchmarkSendMessageRatio(b *testing.B) {
	const sends, senders = 4000, 16
	engine := newBenchEngine(b)
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
