package push_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-jose/go-jose/v4"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

const machineRedis = "redis://127.0.0.1:6379/0"

// sharedNamespace opens n stores on one fresh Redis namespace, as n
// replicas would, and deletes its keys when the test ends.
func sharedNamespace(t *testing.T, n int) ([]*redisstore.Store, *redis.Client, string) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err != nil {
		t.Fatalf("the shared queue tests need the machine's Redis on 127.0.0.1:6379: %v", err)
	} else {
		c.Close()
	}
	b := make([]byte, 8)
	rand.Read(b)
	ns := "pushtest-" + hex.EncodeToString(b)
	o, _ := redis.ParseURL(machineRedis)
	rdb := redis.NewClient(o)
	t.Cleanup(func() {
		ctx := context.Background()
		it := rdb.Scan(ctx, 0, "handoff:{"+ns+"}:*", 500).Iterator()
		for it.Next(ctx) {
			rdb.Del(ctx, it.Val())
		}
		rdb.Close()
	})
	var out []*redisstore.Store
	for range n {
		s, err := redisstore.Open(t.Context(), machineRedis, ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out, rdb, "handoff:{" + ns + "}:"
}

// receiver is a webhook that records delivery ids in order, and answers
// 503 while down is set.
type receiver struct {
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	ids  []string
	got  chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		if r.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.mu.Lock()
		r.ids = append(r.ids, req.Header.Get(webhook.HeaderDeliveryID))
		r.mu.Unlock()
		r.got <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

// taskWithHook stores a task of n events with a push config to url that
// has delivered none of them yet.
func taskWithHook(t *testing.T, s tasks.Store, n int, url string) a2a.TaskID {
	t.Helper()
	owner := tasks.Owner{Principal: "p"}
	id := a2a.NewTaskID()
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	evs := []a2a.Event{task}
	for i := 1; i < n; i++ {
		evs = append(evs, a2a.NewArtifactEvent(task, a2a.NewTextPart(fmt.Sprint("chunk ", i))))
	}
	if err := s.Append(t.Context(), &tasks.Snapshot{Task: task, Owner: owner, Version: uint64(n), Updated: time.Now()}, evs); err != nil {
		t.Fatal(err)
	}
	cfg := &a2a.PushConfig{TaskID: id, ID: "hook", URL: url}
	if err := s.PutPushConfig(t.Context(), owner, cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdatePushDelivery(t.Context(), &tasks.PushDelivery{Owner: owner, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	return id
}

// runDispatcher runs a dispatcher on s until the returned stop.
func runDispatcher(t *testing.T, s tasks.Store, opts ...push.DispatcherOption) (*push.Dispatcher, func()) {
	ks := keySet(t, jose.EdDSA, "k")
	opts = append([]push.DispatcherOption{push.WithBackoff(50*time.Millisecond, 100*time.Millisecond), push.WithRetries(1000, time.Hour),
		push.WithClaimIdle(time.Second)}, opts...)
	d := push.NewDispatcher(s, push.NewSigner(ks, "http://agent.test"), push.NewGuard([]string{"127.0.0.1"}).Client(testTimeout), opts...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return d, stop
}

func waitDeliveries(t *testing.T, r *receiver, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for len(r.delivered()) < n {
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("%d deliveries after 10s, want %d: %v", len(r.delivered()), n, r.delivered())
		}
	}
	return r.delivered()
}

func wantInOrder(t *testing.T, got []string, task a2a.TaskID, n int) {
	t.Helper()
	var want []string
	for seq := 1; seq <= n; seq++ {
		want = append(want, fmt.Sprintf("%s/hook/%d", task, seq))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries = %v, want each event once, in order: %v", got, want)
	}
}

// TestSharedQueueAnyReplicaDelivers: a commit on one replica queues a job
// that one of the replicas takes; every event is delivered once, in
// order, and the queue is left empty.
func TestSharedQueueAnyReplicaDelivers(t *testing.T) {
	stores, rdb, prefix := sharedNamespace(t, 2)
	r := newReceiver(t)
	a, _ := runDispatcher(t, stores[0])
	runDispatcher(t, stores[1])
	var ids []a2a.TaskID
	for range 5 {
		id := taskWithHook(t, stores[0], 3, r.srv.URL+"/hook")
		a.Notify(id)
		a.Notify(id) // a second job for the same events changes nothing
		ids = append(ids, id)
	}
	got := waitDeliveries(t, r, 15)
	for _, id := range ids {
		var mine []string
		for _, g := range got {
			if len(g) > len(id) && g[:len(id)] == string(id) {
				mine = append(mine, g)
			}
		}
		wantInOrder(t, mine, id, 3)
	}
	waitQueueEmpty(t, rdb, prefix)
}

func waitQueueEmpty(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rdb.XLen(t.Context(), prefix+"pushq").Result()
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("push queue still holds %d jobs (%v), want every job acknowledged and deleted", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSharedQueueDeadReplicasJobIsClaimed: a replica retrying a delivery
// dies (its Redis connection closes with it); another replica claims its
// pending job once idle and delivers every event, once, in order.
func TestSharedQueueDeadReplicasJobIsClaimed(t *testing.T) {
	stores, rdb, prefix := sharedNamespace(t, 2)
	r := newReceiver(t)
	r.down.Store(true)
	a, stopA := runDispatcher(t, stores[0])
	id := taskWithHook(t, stores[0], 3, r.srv.URL+"/hook")
	a.Notify(id)
	// A holds the job and retries: a failed attempt is stored.
	waitFor := time.Now().Add(10 * time.Second)
	for {
		pds, err := stores[1].PushDeliveries(t.Context(), id)
		p, perr := rdb.XPending(t.Context(), prefix+"pushq", "deliver").Result()
		if err == nil && len(pds) == 1 && pds[0].Attempts > 0 && perr == nil && p.Count >= 1 {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("A is not retrying after 10s: %v %v, pending %v %v", pds, err, p, perr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stores[0].Close() // A dies: no touch, no ack, no unlock
	stopA()
	r.down.Store(false)
	dead := time.Now()
	runDispatcher(t, stores[1])
	got := waitDeliveries(t, r, 3)
	if took := time.Since(dead); took < time.Second {
		t.Fatalf("B delivered %s after A died, before the job was idle for WithClaimIdle (1s): it was not A's any more", took)
	}
	wantInOrder(t, got, id, 3)
	waitQueueEmpty(t, rdb, prefix)
}

// TestSharedQueueLostJobIsRequeued: a task whose deliveries lag with no job
// queued (its replica died between storing the events and queueing their
// job) is found by a replica's scan and delivered.
func TestSharedQueueLostJobIsRequeued(t *testing.T) {
	stores, rdb, prefix := sharedNamespace(t, 1)
	r := newReceiver(t)
	id := taskWithHook(t, stores[0], 3, r.srv.URL+"/hook") // no Notify: no job
	runDispatcher(t, stores[0])
	wantInOrder(t, waitDeliveries(t, r, 3), id, 3)
	waitQueueEmpty(t, rdb, prefix)
}
