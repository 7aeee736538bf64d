package push_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// deliveryBench stores `webhooks` tasks, each with `events` events and one
// push config pointing at a local receiver, and returns the bodies a bare
// client would post.
func deliveryBench(b *testing.B, webhooks, events int, receiver string) (*boltstore.Store, [][]byte) {
	store, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	owner := tasks.Owner{Principal: "bench"}
	var bodies [][]byte
	for w := range webhooks {
		id := a2a.TaskID(fmt.Sprintf("task-%d", w))
		t := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		evs := []a2a.Event{t}
		for i := 1; i < events; i++ {
			evs = append(evs, a2a.NewArtifactEvent(t, a2a.NewTextPart(fmt.Sprintf("chunk %d of a benchmark task", i))))
		}
		if err := store.Append(context.Background(), &tasks.Snapshot{Task: t, Owner: owner, Version: uint64(len(evs)), Updated: time.Now()}, evs); err != nil {
			b.Fatal(err)
		}
		cfg := &a2a.PushConfig{TaskID: id, ID: "hook", URL: receiver}
		if err := store.PutPushConfig(context.Background(), owner, cfg); err != nil {
			b.Fatal(err)
		}
		if err := store.UpdatePushDelivery(context.Background(), &tasks.PushDelivery{Owner: owner, Config: cfg}); err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			body, _ := (a2a.StreamResponse{Event: ev}).MarshalJSON()
			bodies = append(bodies, body)
		}
	}
	return store, bodies
}

// BenchmarkDelivery measures push deliveries per second through the
// Dispatcher (signed, durable state after every delivery, in order per
// webhook) against a bare net/http client posting the same bodies with the
// same concurrency, and reports the ratio (x_bare).
func BenchmarkDelivery(b *testing.B) {
	for _, webhooks := range []int{1, 64} {
		b.Run(fmt.Sprintf("webhooks-%d", webhooks), func(b *testing.B) {
			const events = 20
			var received atomic.Int64
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				received.Add(1)
			}))
			defer recv.Close()
			ks := keySet(b, jose.EdDSA, "bench")
			guard := push.NewGuard([]string{"127.0.0.1"})
			var dispatched, bare time.Duration
			for range b.N {
				store, bodies := deliveryBench(b, webhooks, events, recv.URL+"/hook")
				received.Store(0)
				d := push.NewDispatcher(store, push.NewSigner(ks, "http://agent.bench"), guard.Client(5*time.Second))
				ctx, cancel := context.WithCancel(context.Background())
				start := time.Now()
				done := make(chan struct{})
				go func() { d.Run(ctx); close(done) }()
				for received.Load() < int64(len(bodies)) {
					time.Sleep(time.Millisecond)
				}
				dispatched += time.Since(start)
				cancel()
				<-done

				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: webhooks}}
				start = time.Now()
				var wg sync.WaitGroup
				for w := range webhooks { // one sender per webhook, in order, as the dispatcher
					wg.Go(func() {
						for _, body := range bodies[w*events : (w+1)*events] {
							resp, err := client.Post(recv.URL+"/hook", "application/json", strings.NewReader(string(body)))
							if err != nil {
								b.Error(err)
								return
							}
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
				bare += time.Since(start)
			}
			n := float64(webhooks * events * b.N)
			b.ReportMetric(n/dispatched.Seconds(), "deliveries/s")
			b.ReportMetric(n/bare.Seconds(), "bare_posts/s")
			b.ReportMetric(bare.Seconds()/dispatched.Seconds(), "x_bare")
		})
	}
}
