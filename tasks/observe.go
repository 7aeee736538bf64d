package tasks

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// An Observer hears of what the engine stores ([WithObserver]): metrics.
// It is called on the engine's writer goroutines and must be cheap and safe
// for concurrent use.
type Observer interface {
	// TaskState reports that a task entered state s in a stored write.
	TaskState(s a2a.TaskState)
	// StoreAppend reports one append of events to the store, which took d;
	// err is the store's refusal or failure, nil once the events are durable.
	StoreAppend(events int, err error, d time.Duration)
}

// append stores evs, which move a task from prev (nil: a new task) to
// next, and reports the append to the observer.
func (e *Engine) append(ctx context.Context, prev, next *Snapshot, evs []a2a.Event) error {
	o := e.cfg.observer
	if o == nil {
		return e.store.Append(ctx, next, evs)
	}
	start := time.Now()
	err := e.store.Append(ctx, next, evs)
	observeAppend(o, prev, evs, err, time.Since(start))
	return err
}

// observeAppend reports an append of evs, which moved a task from prev
// (nil: a new task) and took d, to o.
func observeAppend(o Observer, prev *Snapshot, evs []a2a.Event, err error, d time.Duration) {
	o.StoreAppend(len(evs), err, d)
	if err != nil {
		return
	}
	var state a2a.TaskState
	if prev != nil {
		state = prev.Task.Status.State
	}
	for _, ev := range evs {
		var s a2a.TaskState
		switch ev := ev.(type) {
		case *a2a.Task:
			s = ev.Status.State
		case *a2a.TaskStatusUpdateEvent:
			s = ev.Status.State
		default:
			continue
		}
		if s != state {
			state = s
			o.TaskState(s)
		}
	}
}
