package a2ahttp

import (
	"sync"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/a2ajson"
)

// sharedEvents holds the JSON of the events lately written on streams, by
// identity: the engine hands every subscriber of a task the same event
// values, so one event fanned out to n streams is encoded once, not n times
// (each stream only frames the shared bytes with its own JSON-RPC id).
var sharedEvents = newEventCache(256, 32<<10)

// eventCache maps recent events to their StreamResponse JSON. It holds at
// most size events, whose JSON is at most maxJSON bytes each: a larger
// event, or one pushed out, is encoded by each stream that writes it, as
// without the cache.
type eventCache struct {
	maxJSON int

	// last is the event encoded last, read without the lock: a fan-out's
	// streams all wake at once for the same event, and 1,000 of them
	// queueing on mu put the lock's hand-offs in the fan-out's tail.
	last atomic.Pointer[encodedEvent]

	mu    sync.Mutex
	byEv  map[a2a.Event]*encodedEvent
	order []a2a.Event // a ring: the oldest entry is pushed out first
	next  int
}

// encodedEvent is one event's JSON, made once by the first stream that
// needs it while the others wait for it.
type encodedEvent struct {
	once sync.Once
	ev   a2a.Event
	slot int // its place in order
	json []byte
	err  error
}

func newEventCache(size, maxJSON int) *eventCache {
	return &eventCache{maxJSON: maxJSON, byEv: make(map[a2a.Event]*encodedEvent, size), order: make([]a2a.Event, size)}
}

// appendEvent appends ev as [a2ajson.AppendStreamResponse] does, from the
// cache when another stream encoded the same event.
func (c *eventCache) appendEvent(b []byte, ev a2a.Event) ([]byte, error) {
	switch ev.(type) {
	case *a2a.Task, *a2a.Message, *a2a.TaskStatusUpdateEvent, *a2a.TaskArtifactUpdateEvent:
		// pointers: comparable, and shared by identity
	default:
		return a2ajson.AppendStreamResponse(b, ev)
	}
	if l := c.last.Load(); l != nil && l.ev == ev {
		return append(b, l.json...), nil
	}
	c.mu.Lock()
	e, ok := c.byEv[ev]
	if !ok {
		e = &encodedEvent{ev: ev, slot: c.next}
		if old := c.order[c.next]; old != nil {
			delete(c.byEv, old)
		}
		c.order[c.next], c.byEv[ev] = ev, e
		c.next = (c.next + 1) % len(c.order)
	}
	c.mu.Unlock()
	e.once.Do(func() {
		j, err := a2ajson.AppendStreamResponse(nil, ev)
		e.json, e.err = j, err
		if err != nil || len(j) > c.maxJSON {
			c.forget(ev, e) // neither large bytes nor a large event are kept alive
		} else {
			c.last.Store(e) // after json is set: readers of last do not wait on once
		}
	})
	if e.err != nil {
		return nil, e.err
	}
	return append(b, e.json...), nil
}

// forget drops ev's entry e, if it is still the cache's.
func (c *eventCache) forget(ev a2a.Event, e *encodedEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byEv[ev] != e {
		return
	}
	delete(c.byEv, ev)
	if c.order[e.slot] == ev {
		c.order[e.slot] = nil
	}
}
