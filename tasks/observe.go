package tasks

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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

// A LifecycleObserver hears of each task's creation and end
// ([WithLifecycleObserver]): hooks. It is called on the engine's writer
// goroutines once the write is stored, and must not block: it should hand
// the snapshot on (it is immutable) and return. Safe for concurrent use.
type LifecycleObserver interface {
	// TaskCreated reports the stored first write of a new task: state is
	// the state the task was created in (its first event's), snap the task
	// as of the whole write, which may have taken it further (the engine
	// stores an executor's events in batches): a task that ended within its
	// first write is in its final state, and TaskFinished follows.
	TaskCreated(snap *Snapshot, state a2a.TaskState)
	// TaskFinished reports the stored write that moved a task into a
	// terminal state (completed, failed, canceled or rejected); snap is the
	// task as of it. It is reported once per task.
	TaskFinished(snap *Snapshot)
}

// append stores evs, which move a task from prev (nil: a new task) to
// next, and reports the append to the observers.
func (e *Engine) append(ctx context.Context, prev, next *Snapshot, evs []a2a.Event) error {
	o, t := e.cfg.observer, e.cfg.tracer
	if o == nil && t == nil {
		err := e.store.Append(ctx, next, evs)
		e.observeLifecycle(prev, next, evs, err)
		return err
	}
	if t != nil {
		var span trace.Span
		ctx, span = t.Start(ctx, "handoff.store.append", trace.WithAttributes(
			attribute.String("a2a.task_id", string(next.Task.ID)), attribute.Int("handoff.events", len(evs))))
		defer span.End()
	}
	start := time.Now()
	err := e.store.Append(ctx, next, evs)
	if o != nil {
		observeAppend(o, prev, evs, err, time.Since(start))
	}
	e.observeLifecycle(prev, next, evs, err)
	if err != nil && t != nil {
		sp := trace.SpanFromContext(ctx)
		sp.RecordError(err)
		sp.SetStatus(codes.Error, "append failed")
	}
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

// observeLifecycle reports a stored write of evs that moved a task from
// prev (nil: a new task) to next to the lifecycle observer.
func (e *Engine) observeLifecycle(prev, next *Snapshot, evs []a2a.Event, err error) {
	l := e.cfg.lifecycle
	if l == nil || err != nil {
		return
	}
	if prev == nil {
		state := next.Task.Status.State
		if len(evs) > 0 {
			if t, ok := evs[0].(*a2a.Task); ok { // a new task's first event is the task (recordLocked)
				state = t.Status.State
			}
		}
		l.TaskCreated(next, state)
	}
	if next.Task.Status.State.Terminal() && (prev == nil || !prev.Task.Status.State.Terminal()) {
		l.TaskFinished(next)
	}
}
