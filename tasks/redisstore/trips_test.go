package redisstore_test

import (
	"context"
	"iter"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/redistest"
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

// BenchmarkEngineSend is a blocking SendMessage at 64 in flight on the
// engine over the embedded store and over Redis (a server of its own, whose
// INFO commandstats give the server's time and commands per send), in one
// run, so that their ratio is judged on one machine state:
// go test -run '^$' -bench EngineSend ./tasks/redisstore.
func BenchmarkEngineSend(b *testing.B) {
	srv := redistest.Start(b, redistest.FreePort(b))
	admin := redistest.ClientFor(b, srv.URL)
	for _, be := range []struct {
		name string
		open func(b *testing.B) tasks.Store
	}{
		{"bolt", func(b *testing.B) tasks.Store {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"redis", func(b *testing.B) tasks.Store { s, _ := redistest.OpenStore(b, srv.URL); return s }},
	} {
		b.Run(be.name, func(b *testing.B) {
			e, err := tasks.NewEngine(b.Context(), be.open(b), doneExec{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { e.Shutdown(context.Background()) })
			calls0, usec0 := commandStats(b, admin)
			b.SetParallelism(32) // 64 senders on 2 cores
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
					if _, err := e.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			calls, usec := commandStats(b, admin)
			b.ReportMetric(float64(calls-calls0-1)/float64(b.N), "server-cmds/op") // less the INFO
			b.ReportMetric(float64(usec-usec0)/float64(b.N), "server-µs/op")
		})
	}
}

// commandStats sums the calls and microseconds of INFO commandstats.
func commandStats(tb testing.TB, c redis.UniversalClient) (calls, usec int64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		_, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += int64(n)
			case "usec":
				usec += int64(n)
			}
		}
	}
	return calls, usec
}
