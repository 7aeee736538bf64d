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
	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// countingStore counts the writes of delivery state.
type countingStore struct {
	*boltstore.Store
	updates atomic.Int64
}

func (s *countingStore) UpdatePushDelivery(ctx context.Context, d *tasks.PushDelivery) error {
	s.updates.Add(1)
	return s.Store.UpdatePushDelivery(ctx, d)
}

// cursorFixture is a stored task with a backlog of events and a push
// config pointing at a local receiver, which counts what it gets by
// delivery id, taking delay for each.
type cursorFixture struct {
	st     *countingStore
	task   *a2a.Task
	mu     sync.Mutex
	got    map[string]int
	signer *push.Signer
	client *http.Client
}

func newCursorFixture(t *testing.T, events int, delay time.Duration) *cursorFixture {
	t.Helper()
	bs, err := boltstore.Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	f := &cursorFixture{st: &countingStore{Store: bs}, got: map[string]int{}}
	st := f.st
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		f.mu.Lock()
		f.got[r.Header.Get(webhook.HeaderDeliveryID)]++
		f.mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	owner := tasks.Owner{Principal: "p"}
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	ctx := t.Context()
	if err := st.Append(ctx, &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Now()}, []a2a.Event{task}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPushConfig(ctx, owner, &a2a.PushConfig{TaskID: task.ID, ID: "hook", URL: recv.URL}); err != nil {
		t.Fatal(err)
	}
	var evs []a2a.Event
	for i := range events {
		evs = append(evs, a2a.NewArtifactEvent(task, a2a.NewTextPart(fmt.Sprintf("chunk %d", i))))
	}
	if err := st.Append(ctx, &tasks.Snapshot{Task: task, Owner: owner, Version: uint64(1 + events), Updated: time.Now()}, evs); err != nil {
		t.Fatal(err)
	}
	f.task = task
	f.signer = push.NewSigner(keySet(t, jose.EdDSA, "k"), "http://agent")
	f.client = push.NewGuard([]string{"127.0.0.1"}).Client(testTimeout)
	return f
}

// received is how many distinct deliveries the receiver got.
func (f *cursorFixture) received() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// run runs a dispatcher until the receiver got n distinct deliveries (and
// whatever a resend would add within 50ms), then stops it.
func (f *cursorFixture) run(t *testing.T, n int, settle time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	d := push.NewDispatcher(f.st, f.signer, f.client)
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	deadline := time.Now().Add(testTimeout)
	for f.received() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(settle)
	cancel()
	<-done
}

// TestCursorStoredInBatches delivers a backlog of events and checks the
// delivery state was written once per CursorBatch deliveries or fewer, not
// once per delivery, and that a restart after a clean stop sends none of
// them again.
func TestCursorStoredInBatches(t *testing.T) {
	const events = 300
	f := newCursorFixture(t, events, 0)
	st, task, ctx := f.st, f.task, t.Context()
	f.run(t, events, 50*time.Millisecond) // 50ms: what a resend would take to arrive
	if n, most := st.updates.Load(), int64(events/push.CursorBatch+2); n > most {
		t.Errorf("%d writes of the delivery state for %d deliveries, want at most %d", n, events, most)
	}
	pds, err := st.PushDeliveries(ctx, task.ID)
	if err != nil || len(pds) != 1 {
		t.Fatalf("PushDeliveries() = %v, %v", pds, err)
	}
	if pds[0].Delivered != 1+events || pds[0].DeliveredCount != events {
		t.Errorf("stored Delivered = %d, DeliveredCount = %d; want %d, %d", pds[0].Delivered, pds[0].DeliveredCount, 1+events, events)
	}
	f.run(t, events, 50*time.Millisecond) // a restart: nothing is left to send
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) != events {
		t.Errorf("%d deliveries, want %d", len(f.got), events)
	}
	for id, n := range f.got {
		if n != 1 || !strings.HasPrefix(id, "t1/hook/") {
			t.Errorf("delivery %q received %d times, want once", id, n)
		}
	}
}

// TestCursorStoredOnStop stops the dispatcher in the middle of a backlog,
// between two writes of its state, and checks that the next start sends
// again at most the one delivery the stop cut short, not the deliveries
// made since the last write.
func TestCursorStoredOnStop(t *testing.T) {
	const events = 200
	f := newCursorFixture(t, events, time.Millisecond)
	f.run(t, push.CursorBatch/2, 0)
	stopped := f.received()
	if stopped >= events {
		t.Fatalf("all %d delivered before the stop", stopped)
	}
	f.run(t, events, 50*time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	var again []string
	for id, n := range f.got {
		if n > 1 {
			again = append(again, id)
		}
	}
	if len(f.got) != events || len(again) > 1 {
		t.Errorf("%d distinct deliveries (want %d), %d sent again after a stop at %d: %v; want at most the one in flight", len(f.got), events, len(again), stopped, again)
	}
}
