package push_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// retryCounts is a push.RetryObserver that counts what it hears.
type retryCounts struct {
	mu       sync.Mutex
	attempts map[string]int
	retries  map[string]int
}

func newRetryCounts() *retryCounts {
	return &retryCounts{attempts: map[string]int{}, retries: map[string]int{}}
}

func (c *retryCounts) DeliveryAttempt(outcome string, _, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts[outcome]++
}

func (c *retryCounts) Retried(outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retries[outcome]++
}

func (c *retryCounts) get(outcome string) (attempts, retries int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts[outcome], c.retries[outcome]
}

// retryStores are the two task stores, each a fresh one per test.
var retryStores = map[string]func(t *testing.T) tasks.Store{
	"bolt": func(t *testing.T) tasks.Store {
		s, err := boltstore.Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
	"redis": func(t *testing.T) tasks.Store {
		stores, _, _ := sharedNamespace(t, 1)
		return stores[0]
	},
}

var hookOwner = tasks.Owner{Principal: "p"}

// waitStatus polls the config's status until ok holds.
func waitStatus(t *testing.T, s tasks.Store, id a2a.TaskID, what string, ok func(push.Status) bool) push.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := push.Statuses(t.Context(), s, nil)
		for _, x := range st {
			if err == nil && x.TaskID == id && ok(x) {
				return x
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s, want %s: statuses %+v, %v", what, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRetryDeadLetter: with one attempt allowed, a webhook that refuses
// dead-letters the event; once the webhook accepts again, an operator's
// retry sends it, and the receiver gets it exactly once; the dead letter is
// gone, a second retry is refused, and the observer counted one
// redelivery.
func TestRetryDeadLetter(t *testing.T) {
	for name, open := range retryStores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			r := newReceiver(t)
			r.down.Store(true)
			counts := newRetryCounts()
			d, _ := runDispatcher(t, s, push.WithRetries(1, time.Hour), push.WithObserver(counts))
			id := taskWithHook(t, s, 1, r.srv.URL+"/hook")
			d.Watch(id)
			d.Notify(id)
			st := waitStatus(t, s, id, "a dead letter", func(x push.Status) bool { return len(x.Dead) == 1 })
			if st.Dead[0].Seq != 1 || st.Dead[0].Reason != "HTTP 503 Service Unavailable" {
				t.Fatalf("dead letter %+v, want event 1 refused with 503", st.Dead[0])
			}
			if n, _ := counts.get(push.AttemptDead); n != 1 {
				t.Fatalf("dead attempts counted %d, want 1", n)
			}
			if _, err := d.Retry(t.Context(), tasks.Owner{Principal: "q"}, id, "hook", 1, "q"); !errors.Is(err, tasks.ErrNotFound) {
				t.Fatalf("another owner's retry: %v, want ErrNotFound", err)
			}
			if _, err := d.Retry(t.Context(), hookOwner, id, "hook", 2, "ops"); !errors.Is(err, push.ErrNothingToRetry) {
				t.Fatalf("retry of an event that is no dead letter: %v, want ErrNothingToRetry", err)
			}

			r.down.Store(false)
			if _, err := d.Retry(t.Context(), hookOwner, id, "hook", 1, "ops"); err != nil {
				t.Fatal(err)
			}
			if got := waitDeliveries(t, r, 1); got[0] != fmt.Sprintf("%s/hook/1", id) {
				t.Fatalf("delivered %v, want event 1", got)
			}
			st = waitStatus(t, s, id, "no dead letter, no request left", func(x push.Status) bool { return len(x.Dead) == 0 && len(x.Retries) == 0 })
			if st.Delivered != 1 {
				t.Fatalf("status %+v, want 1 delivered", st)
			}
			if _, n := counts.get(push.RetryDelivered); n != 1 {
				t.Fatalf("redeliveries counted %d, want 1", n)
			}
			if _, err := d.Retry(t.Context(), hookOwner, id, "hook", 1, "ops"); !errors.Is(err, push.ErrNothingToRetry) {
				t.Fatalf("second retry: %v, want ErrNothingToRetry", err)
			}
			time.Sleep(200 * time.Millisecond)
			if got := r.delivered(); len(got) != 1 {
				t.Fatalf("deliveries %v, want exactly one", got)
			}
		})
	}
}

// TestRetrySurvivesRestart: requests to retry made while no dispatcher runs
// (one asked twice, as two operators racing would) are kept by the store; the
// next dispatcher delivers the dead letter once and drops both.
func TestRetrySurvivesRestart(t *testing.T) {
	for name, open := range retryStores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			r := newReceiver(t)
			r.down.Store(true)
			d, stop := runDispatcher(t, s, push.WithRetries(1, time.Hour))
			id := taskWithHook(t, s, 2, r.srv.URL+"/hook")
			d.Watch(id)
			d.Notify(id)
			waitStatus(t, s, id, "two dead letters", func(x push.Status) bool { return len(x.Dead) == 2 })
			stop()

			r.down.Store(false)
			for _, by := range []string{"ops", "ops2"} {
				if _, err := d.Retry(t.Context(), hookOwner, id, "hook", 2, by); err != nil {
					t.Fatal(err)
				}
			}
			waitStatus(t, s, id, "two requests stored", func(x push.Status) bool { return len(x.Retries) == 2 })
			time.Sleep(100 * time.Millisecond)
			if got := r.delivered(); len(got) != 0 {
				t.Fatalf("delivered %v with no dispatcher running", got)
			}

			runDispatcher(t, s, push.WithRetries(1, time.Hour))
			if got := waitDeliveries(t, r, 1); got[0] != fmt.Sprintf("%s/hook/2", id) {
				t.Fatalf("delivered %v, want event 2", got)
			}
			st := waitStatus(t, s, id, "no request left", func(x push.Status) bool { return len(x.Retries) == 0 })
			if len(st.Dead) != 1 || st.Dead[0].Seq != 1 {
				t.Fatalf("dead letters %+v, want event 1 alone", st.Dead)
			}
			time.Sleep(200 * time.Millisecond)
			if got := r.delivered(); len(got) != 1 {
				t.Fatalf("deliveries %v, want exactly one", got)
			}
		})
	}
}

// TestRetryNowCutsTheBackoff: a delivery waiting out an hour's backoff is
// tried at once when an operator asks, and delivered once.
func TestRetryNowCutsTheBackoff(t *testing.T) {
	for name, open := range retryStores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			r := newReceiver(t)
			r.down.Store(true)
			counts := newRetryCounts()
			d, _ := runDispatcher(t, s, push.WithBackoff(time.Hour, time.Hour), push.WithObserver(counts))
			id := taskWithHook(t, s, 1, r.srv.URL+"/hook")
			d.Watch(id)
			d.Notify(id)
			waitStatus(t, s, id, "a delivery retrying", func(x push.Status) bool { return x.Attempts == 1 })
			r.down.Store(false)
			start := time.Now()
			if _, err := d.Retry(t.Context(), hookOwner, id, "hook", 0, "ops"); err != nil {
				t.Fatal(err)
			}
			waitDeliveries(t, r, 1)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("delivered %s after the request, want at once", took)
			}
			waitStatus(t, s, id, "delivered, nothing retrying", func(x push.Status) bool { return x.Delivered == 1 && x.Attempts == 0 && len(x.Retries) == 0 })
			if _, n := counts.get(push.RetryNow); n != 1 {
				t.Fatalf("retries now counted %d, want 1", n)
			}
		})
	}
}

// TestRetryAcrossReplicas: on the shared store, a request made through one
// replica reaches the delivery held by another, which is waiting out an
// hour's backoff; the event is delivered once.
func TestRetryAcrossReplicas(t *testing.T) {
	stores, _, _ := sharedNamespace(t, 2)
	r := newReceiver(t)
	r.down.Store(true)
	a, _ := runDispatcher(t, stores[0], push.WithBackoff(time.Hour, time.Hour))
	id := taskWithHook(t, stores[0], 1, r.srv.URL+"/hook")
	a.Notify(id)
	waitStatus(t, stores[0], id, "a delivery retrying", func(x push.Status) bool { return x.Attempts == 1 })
	b, _ := runDispatcher(t, stores[1], push.WithBackoff(time.Hour, time.Hour))
	r.down.Store(false)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := b.Retry(ctx, hookOwner, id, "hook", 1, "ops"); err != nil {
		t.Fatal(err)
	}
	wantInOrder(t, waitDeliveries(t, r, 1), id, 1)
	waitStatus(t, stores[1], id, "delivered, no request left", func(x push.Status) bool { return x.Delivered == 1 && len(x.Retries) == 0 })
	time.Sleep(300 * time.Millisecond)
	if got := r.delivered(); len(got) != 1 {
		t.Fatalf("deliveries %v, want exactly one", got)
	}
}
