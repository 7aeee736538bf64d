package tasks

import (
	"context"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// maxTail bounds the events a hub keeps in memory; a subscriber that falls
// further behind reads the rest from the store.
const maxTail = 4096

// hub is the live side of one task: the latest committed snapshot, the
// events committed while anyone watched, and a wake channel closed on every
// change so any number of subscribers wait without per-subscriber queues.
type hub struct {
	id   a2a.TaskID
	mu   sync.Mutex
	snap *Snapshot // nil while a new task has no committed event yet
	tail []Event   // contiguous, ascending Seq
	wake chan struct{}
	run  *run // the execution (or cancellation) in progress, if any
	refs int
	// remote is true while another replica runs the task and this hub is
	// fed from the shared store's log (see replica.go).
	remote bool
}

func newHub(id a2a.TaskID, snap *Snapshot) *hub {
	return &hub{id: id, snap: snap, wake: make(chan struct{})}
}

func (h *hub) taskID() a2a.TaskID { return h.id }

// publish records a committed change and wakes every waiter. Callers hold h.mu.
func (h *hub) publishLocked(snap *Snapshot, evs []Event) {
	if h.snap != nil && snap.Version <= h.snap.Version {
		return // already published: replicas feed a hub from the log too
	}
	for h.snap != nil && len(evs) > 0 && evs[0].Seq <= h.snap.Version {
		evs = evs[1:]
	}
	h.snap = snap
	h.tail = append(h.tail, evs...)
	if len(h.tail) > maxTail {
		h.tail = append([]Event(nil), h.tail[len(h.tail)-maxTail/2:]...)
	}
	h.signalLocked()
}

func (h *hub) signalLocked() {
	close(h.wake)
	h.wake = make(chan struct{})
}

// since returns the events after seq held in memory. ok is false when some of
// them are no longer in the tail and must be read from the store.
func (h *hub) sinceLocked(seq uint64) (evs []Event, ok bool) {
	if len(h.tail) == 0 {
		return nil, h.snap == nil || h.snap.Version <= seq
	}
	first := h.tail[0].Seq
	if seq+1 < first {
		return nil, false
	}
	i := int(seq + 1 - first)
	if i >= len(h.tail) {
		return nil, true
	}
	return h.tail[i:], true
}

// wait blocks until wake is closed or ctx ends.
func wait(ctx context.Context, wake <-chan struct{}) error {
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
