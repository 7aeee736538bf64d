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

// TestCursorStoredInBatches delivers a backlog of events and checks the
// delivery state was written once per CursorBatch deliveries or fewer, not
// once per delivery, and that a restart after a clean stop sends none of
// them again.
func TestCursorStoredInBatches(t *testing.T) {
	const events = 300
	bs, err := boltstore.Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	st := &countingStore{Store: bs}
	var mu sync.Mutex
	got := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.Header.Get(webhook.HeaderDeliveryID)]++
		mu.Unlock()
	}))
	defer recv.Close()
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
	if err := st.Append(ctx, &tasks.Snapshot{Task: task, Owner: owner, Version: 1 + events, Updated: time.Now()}, evs); err != nil {
		t.Fatal(err)
	}
	signer := push.NewSigner(keySet(t, jose.EdDSA, "k"), "http://agent")
	client := push.NewGuard([]string{"127.0.0.1"}).Client(testTimeout)
	run := func() {
		dctx, cancel := context.WithCancel(ctx)
		d := push.NewDispatcher(st, signer, client)
		done := make(chan struct{})
		go func() { d.Run(dctx); close(done) }()
		deadline := time.Now().Add(testTimeout)
		for {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n == events || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // what a resend would take to arrive
		cancel()
		<-done
	}
	run()
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
	run() // a restart: nothing is left to send
	mu.Lock()
	defer mu.Unlock()
	if len(got) != events {
		t.Errorf("%d deliveries, want %d", len(got), events)
	}
	for id, n := range got {
		if n != 1 || !strings.HasPrefix(id, "t1/hook/") {
			t.Errorf("delivery %q received %d times, want once", id, n)
		}
	}
}
