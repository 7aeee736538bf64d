package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// run is one execution of the agent for one task (or, for a task waiting for
// input, one cancellation). Every event goes through emit, which checks and
// applies it under mu, so the executor, a cancellation and the idle watchdog
// never interleave. Applied events queue for the run's writer, which stores
// everything queued in one Append and only then publishes it: events an
// executor yields back to back share one write, and nobody sees an event
// before it is durable.
type run struct {
	e     *Engine
	h     *hub
	owner Owner
	ec    *a2asrv.ExecutorContext

	ctx  context.Context
	stop context.CancelCauseFunc
	// slot is true when the run holds an execution slot (a cancellation of a
	// task waiting for input does not).
	slot bool
	// resume is true when the run takes up a task left unfinished by the
	// previous process, through the executor's [Resumer].
	resume bool

	pushConfig *a2a.PushConfig // saved with the task's first write
	// digest is the content digest of a new task's message that carried an
	// idempotency key, kept in the task's metadata ([ContentDigestKey]).
	digest string
	// kept is ec.Message as the engine stores it ([Redactor]); nil: as sent.
	kept *a2a.Message
	// approver is true when the message is an approver's answer on another
	// caller's task ([ApprovalReader]): it gets the outcome only.
	approver bool

	mu        sync.Mutex
	cur       *Snapshot // with every applied event; nil until a new task's first event
	committed *Snapshot // as stored and published
	pending   []a2a.Event
	spare     []a2a.Event   // the writer's last batch, emptied, for pending to reuse
	writing   bool          // the writer holds a batch outside mu
	flushed   *sync.Cond    // on mu: pending became empty, or writing failed
	wake      chan struct{} // tells the writer there is something pending
	quit      chan struct{} // closed when the writer should exit
	writeErr  error
	// full is the store's refusal of the last write for want of room
	// ([ErrStoreFull]), while the writer waits to write it again; nil once
	// a write is stored.
	full     error
	fullC    chan struct{} // closed at the first such refusal: blocking sends are answered
	fullOnce sync.Once
	ended    bool // no more events are taken
	msg      *a2a.Message
	err      error // ends the run without a task
	idle     *time.Timer
	idleFor  time.Duration // how long the executor may yield nothing
	started  chan struct{} // closed at the first write or at the end
	done     chan struct{} // closed when the run has ended
	endOnce  sync.Once
	startOne sync.Once
}

func (e *Engine) newRun(ctx context.Context, h *hub, owner Owner, ec *a2asrv.ExecutorContext, base *Snapshot, slot bool) *run {
	// The execution outlives the request that started it (a blocking client
	// may leave; the task goes on) but keeps its values: logger, call context.
	ctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	r := &run{e: e, h: h, owner: owner, ec: ec, ctx: ctx, stop: stop, cur: base, committed: base, slot: slot,
		started: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1), quit: make(chan struct{}),
		fullC: make(chan struct{})}
	r.flushed = sync.NewCond(&r.mu)
	select {
	case e.writers <- r:
	default:
		go e.writer(r)
	}
	return r
}

// writerIdle is how long a writer goroutine waits for another run.
const writerIdle = 5 * time.Second

// writer runs the write loops of one run after another. A fresh goroutine
// per run grew its stack again for every task while encoding it, which
// took about a third of the writer's CPU; a reused one keeps its stack.
func (e *Engine) writer(r *run) {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		r.writeLoop()
		idle.Reset(writerIdle)
		select {
		case r = <-e.writers:
		case <-idle.C:
			return
		case <-e.idle: // shut down
			return
		}
	}
}

// maxPending bounds the events an executor may run ahead of the disk.
const maxPending = 256

// writeLoop stores and publishes what emit queued, one batch at a time, until quit.
func (r *run) writeLoop() {
	for {
		select {
		case <-r.wake:
		case <-r.quit:
			return
		}
		r.mu.Lock()
		evs, next, prev := r.pending, r.cur, r.committed
		r.pending, r.spare, r.writing = r.spare, nil, len(evs) > 0
		failed := r.writeErr != nil
		r.mu.Unlock()
		if len(evs) == 0 || failed {
			continue
		}
		err := r.e.append(context.WithoutCancel(r.ctx), prev, next, evs)
		if err == nil && prev == nil && r.pushConfig != nil {
			c := *r.pushConfig
			c.TaskID = r.ec.TaskID
			if c.ID == "" {
				c.ID = string(r.ec.TaskID)
			}
			// A config that came with the message gets every event, from the first.
			sctx := context.WithoutCancel(r.ctx)
			perr := r.e.store.PutPushConfig(sctx, r.owner, &c)
			if perr == nil {
				perr = r.e.store.UpdatePushDelivery(sctx, &PushDelivery{Owner: r.owner, Config: &c})
			}
			if perr != nil {
				r.e.cfg.logger.Error("store push config", slog.String("task_id", string(r.ec.TaskID)), slog.Any("error", perr))
			} else if f := r.e.cfg.onPushConfig; f != nil {
				f(r.ec.TaskID)
			}
		}
		r.mu.Lock()
		r.writing = false
		if snap := r.e.writtenElsewhere(r, prev, err); snap != nil {
			r.committed, r.cur, r.pending, r.ended = snap, snap, nil, true
			r.stop(errLeaseLost)
		} else if err != nil && prev != nil && errors.Is(err, ErrStoreFull) {
			r.keepLocked(evs, err)
			r.mu.Unlock()
			continue
		} else if err != nil {
			r.e.cfg.logger.Error("store task event", slog.String("task_id", string(r.ec.TaskID)), slog.Any("error", err))
			r.writeErr, r.ended = err, true
			if prev == nil {
				r.err = a2a.NewError(a2a.ErrInternalError, "the agent could not store the task")
			}
			r.stop(err)
		} else {
			if r.full != nil {
				r.e.cfg.logger.Info("task store took the task's events again", slog.String("task_id", string(r.ec.TaskID)))
				r.full = nil
			}
			first := version(prev) + 1
			stored := make([]Event, len(evs))
			for i, e := range evs {
				stored[i] = Event{Seq: first + uint64(i), Event: e}
			}
			r.committed = next
			r.h.mu.Lock()
			r.h.publishLocked(next, stored)
			r.h.mu.Unlock()
			r.startOne.Do(func() { close(r.started) })
			if f := r.e.cfg.onCommit; f != nil {
				f(r.ec.TaskID)
			}
		}
		clear(evs) // the events live on in the hub, not through this array
		r.spare = evs[:0]
		r.flushed.Broadcast()
		r.mu.Unlock()
	}
}

// keepLocked, under mu, keeps the events of a write the store refused for
// want of room ahead of those queued since, and has the writer try them
// again after a pause. Only an acknowledged task's writes are kept: the
// task exists, so failing it would need a write too, and its events are
// durable once the store has room; a new task's first write fails at once,
// and its sender is told.
func (r *run) keepLocked(evs []a2a.Event, err error) {
	if r.full == nil {
		r.e.cfg.logger.Warn("task store full: keeping the task's events until it takes them",
			slog.String("task_id", string(r.ec.TaskID)), slog.Any("error", err))
	}
	r.full = err
	r.pending = append(evs, r.pending...)
	r.spare = nil // evs is pending again
	r.writing = false
	r.fullOnce.Do(func() { close(r.fullC) })
	r.flushed.Broadcast()
	time.AfterFunc(fullRetry, func() {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	})
}

// fullRetry is how long the writer waits before it writes again what a
// full store refused: the store's own retry of a stalled disk is 100 ms.
const fullRetry = 200 * time.Millisecond

// giveUpLocked, under mu, stops waiting for a full store to take the
// run's events, at shutdown: the task stays as stored, for the next start.
func (r *run) giveUpLocked() {
	if r.full != nil && r.writeErr == nil {
		r.writeErr = r.full
		r.flushed.Broadcast()
	}
}

// flushLocked waits until everything applied is stored (or storing failed).
func (r *run) flushLocked() {
	for (len(r.pending) > 0 || r.writing) && r.writeErr == nil {
		r.flushed.Wait()
	}
}

// execute runs the executor to its end. It owns one execution slot.
func (r *run) execute() {
	defer r.finish()
	defer func() {
		if p := recover(); p != nil {
			r.e.cfg.logger.Error("agent panicked", slog.String("task_id", string(r.ec.TaskID)),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			r.mu.Lock()
			r.failLocked("The agent crashed while working on this task.")
			r.mu.Unlock()
		}
	}()
	if d := r.e.cfg.idleTimeout; d > 0 {
		if q, ok := r.e.exec.(QuietBound); ok {
			d = max(d, q.QuietFor(r.ec))
		}
		r.mu.Lock()
		r.idleFor = d
		r.idle = time.AfterFunc(d, func() { r.stall(d) })
		r.mu.Unlock()
	}
	events := r.e.exec.Execute
	if r.resume {
		events = r.e.exec.(Resumer).Resume
	} else if r.cur != nil { // a continued task: the new message joins its history
		r.mu.Lock()
		ok := r.recordLocked(nil, r.keptMessage())
		r.mu.Unlock()
		if !ok {
			return
		}
	}
	ctx := r.ctx
	if t := r.e.cfg.tracer; t != nil {
		var span trace.Span
		ctx, span = t.Start(ctx, "handoff.task.execute", trace.WithAttributes(
			attribute.String("a2a.task_id", string(r.ec.TaskID)), attribute.String("a2a.context_id", r.ec.ContextID),
			attribute.Bool("handoff.resumed", r.resume)))
		defer func() {
			r.mu.Lock()
			if r.cur != nil {
				span.SetAttributes(attribute.String("a2a.task_state", string(r.cur.Task.Status.State)))
			}
			r.mu.Unlock()
			span.End()
		}()
	}
	for ev, err := range events(ctx, r.ec) {
		if err != nil {
			r.mu.Lock()
			if r.ended { // canceled, stalled or shut down: the error is the echo of that
				r.mu.Unlock()
				return
			}
			if r.cur == nil {
				r.err = executorError(err)
				r.ended = true
			} else {
				r.e.cfg.logger.Warn("agent failed", slog.String("task_id", string(r.ec.TaskID)), slog.Any("error", err))
				r.failLocked("The agent failed: " + publicReason(err))
			}
			r.mu.Unlock()
			return
		}
		if !r.emit(ev) {
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.ended:
	case r.cur == nil:
		r.err = a2a.NewError(a2a.ErrInvalidAgentResponse, "the agent finished without producing a task or a message")
		r.ended = true
	case !final(r.cur.Task.Status.State):
		r.failLocked("The agent stopped without finishing this task.")
	default:
		r.ended = true
	}
}

// executorError is what a client sees when the executor refused a message
// before creating a task: its a2a error if it gave one, else a generic one.
func executorError(err error) error {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return err
	}
	for _, s := range []error{a2a.ErrInvalidParams, a2a.ErrUnsupportedOperation, a2a.ErrUnsupportedContentType,
		a2a.ErrUnauthenticated, a2a.ErrUnauthorized, a2a.ErrTaskNotFound, a2a.ErrInvalidAgentResponse} {
		if errors.Is(err, s) {
			return err
		}
	}
	return a2a.NewError(a2a.ErrInternalError, "the agent failed before creating a task")
}

// publicReason is the part of an executor's error safe to show a client.
func publicReason(err error) string {
	var ae *a2a.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	return "see the agent's log for details"
}

// emit applies, stores and publishes one event. It returns false when the
// executor should stop: the task became final, or the event was refused.
func (r *run) emit(ev a2a.Event) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return false
	}
	if r.idle != nil {
		r.idle.Reset(r.idleFor)
	}
	if ev == nil {
		r.failLocked("The agent produced an invalid event: nil.")
		return false
	}
	if r.cur == nil {
		if m, ok := ev.(*a2a.Message); ok { // a direct answer: no task is made
			r.msg, r.ended = m, true
			return false
		}
		if t, ok := ev.(*a2a.Task); ok && (t.ID != r.ec.TaskID || t.ContextID != r.ec.ContextID) {
			r.err = a2a.NewError(a2a.ErrInvalidAgentResponse, "the agent produced a task with ids other than the ones it was given")
			r.ended = true
			return false
		}
	}
	for len(r.pending) >= maxPending && r.writeErr == nil {
		r.flushed.Wait()
	}
	if r.ended || !r.recordLocked(ev, nil) {
		return false
	}
	if final(r.cur.Task.Status.State) {
		r.ended = true
		return false
	}
	return true
}

// recordLocked applies ev (or, with ev nil, adds msg to the history) and
// queues the result for the writer. For a new task whose executor did not
// start with the task itself, the submitted task is made first, in the same
// write. It returns false when the event was refused.
func (r *run) recordLocked(ev a2a.Event, msg *a2a.Message) bool {
	now := time.Now()
	queued := len(r.pending)
	next := r.cur
	if next == nil {
		if t, ok := ev.(*a2a.Task); ok {
			ev = r.firstTask(t)
		} else {
			t := r.firstTask(a2a.NewSubmittedTask(r.ec, r.keptMessage()))
			var err error
			if next, err = Apply(nil, t, now); err != nil {
				r.err = a2a.NewError(a2a.ErrInternalError, err.Error())
				r.ended = true
				return false
			}
			r.pending = append(r.pending, t)
		}
	}
	if msg != nil {
		// A continued task is working again, and the question it asked moves
		// to the history before the answer.
		t := *next.Task
		t.History = t.History[:len(t.History):len(t.History)]
		if t.Status.Message != nil {
			t.History = append(t.History, t.Status.Message)
		}
		t.History = append(t.History, msg)
		ts := now // its own copy: taking now's address would move now to the heap on every event
		t.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts}
		next = &Snapshot{Task: &t, Owner: next.Owner, Version: next.Version + 1, Updated: now}
		r.pending = append(r.pending, &t)
	} else {
		n, err := Apply(next, ev, now)
		if err != nil {
			made := len(r.pending) > queued
			r.pending = r.pending[:queued] // a submitted task made above goes with the refused event
			if made || r.cur != nil {
				r.failLocked("The agent produced an invalid event sequence: " + err.Error())
			} else {
				r.err = a2a.NewError(a2a.ErrInvalidAgentResponse, "the agent produced an invalid first event: "+err.Error())
				r.ended = true
			}
			return false
		}
		next = n
		r.pending = append(r.pending, ev)
	}
	next.Owner = r.owner
	r.cur = next
	select {
	case r.wake <- struct{}{}:
	default: // the writer is already due to look
	}
	return true
}

// firstTask is t, the first event of a new task, as the engine stores it:
// the message in its history as kept ([Redactor]), the content digest of its
// keyed message in its metadata. t is left as the executor made it.
func (r *run) firstTask(t *a2a.Task) *a2a.Task {
	history, changed := r.keptHistory(t.History)
	if r.digest == "" && !changed {
		return t
	}
	c := *t
	c.History = history
	if r.digest != "" {
		c.Metadata = mergeMeta(t.Metadata, map[string]any{ContentDigestKey: r.digest})
	}
	return &c
}

func version(s *Snapshot) uint64 {
	if s == nil {
		return 0
	}
	return s.Version
}

// failLocked ends the task failed with a status message for the client. A
// run that has no task yet ends with an error instead.
func (r *run) failLocked(reason string) {
	if r.ended {
		return
	}
	if r.cur == nil {
		r.err = a2a.NewError(a2a.ErrInvalidAgentResponse, reason)
		r.ended = true
		return
	}
	ev := a2a.NewStatusUpdateEvent(r.cur.Task, a2a.TaskStateFailed, agentMessage(r.cur.Task, reason))
	r.recordLocked(ev, nil)
	r.ended = true
}

// stall fails a task whose executor yielded nothing for d.
func (r *run) stall(d time.Duration) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	r.e.cfg.logger.Warn("agent stopped answering", slog.String("task_id", string(r.ec.TaskID)), slog.Duration("idle", d))
	r.failLocked(fmt.Sprintf("The agent stopped answering: no event for %s.", d))
	r.mu.Unlock()
	r.stop(errAgentIdle)
	r.finish() // waiters go on even if the executor never returns
}

// abort fails the task because the agent is shutting down.
func (r *run) abort(reason string) {
	r.mu.Lock()
	r.giveUpLocked()
	r.failLocked(reason)
	r.mu.Unlock()
	r.stop(context.Canceled)
	r.finish()
}

// cancel asks the executor to cancel the task and makes sure it ends
// canceled. retry is true when the run ended meanwhile and the caller should
// look at the task again.
func (r *run) cancel(ctx context.Context, meta map[string]any) (t *a2a.Task, retry bool, err error) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return nil, true, nil
	}
	if r.cur == nil {
		r.mu.Unlock()
		return nil, true, nil
	}
	ec := *r.ec
	ec.StoredTask, ec.Message = r.cur.Task, nil
	if meta != nil {
		ec.Metadata = meta
	}
	r.mu.Unlock()

	for ev, err := range r.e.exec.Cancel(ctx, &ec) {
		if err != nil {
			return nil, false, executorError(err)
		}
		if !r.emit(ev) {
			break
		}
	}
	r.mu.Lock()
	if !r.ended {
		r.recordLocked(a2a.NewStatusUpdateEvent(r.cur.Task, a2a.TaskStateCanceled, nil), nil)
		r.ended = true
	}
	r.flushLocked()
	cur, werr := r.committed, r.writeErr
	r.mu.Unlock()
	r.stop(errCanceledByClient)
	if werr != nil {
		return nil, false, a2a.NewError(a2a.ErrInternalError, "the agent could not store the cancellation")
	}
	if s := cur.Task.Status.State; s != a2a.TaskStateCanceled {
		return nil, false, a2a.NewError(a2a.ErrTaskNotCancelable, fmt.Sprintf("task %s is %s and cannot be canceled", cur.Task.ID, stateName(s)))
	}
	return cur.Task, false, nil
}

// finish releases the run's slot and hub and wakes its waiters, once.
func (r *run) finish() {
	r.endOnce.Do(func() {
		r.mu.Lock()
		r.ended = true
		if r.idle != nil {
			r.idle.Stop()
		}
		r.flushLocked()
		finished := r.committed != nil && r.committed.Task.Status.State.Terminal()
		r.mu.Unlock()
		close(r.quit)
		r.startOne.Do(func() { close(r.started) })
		r.h.mu.Lock()
		if r.h.run == r {
			r.h.run = nil
		}
		r.h.signalLocked()
		r.h.mu.Unlock()
		if !finished {
			r.finishLease() // before waiters go on: the task takes a new message at once
		}
		close(r.done)
		if finished {
			// After: a finished task takes no message, so a blocking send
			// need not wait for the lease's round trip to the shared store.
			r.finishLease()
		}
		r.e.release(r.h.taskID(), r.h)
		if r.slot {
			<-r.e.slots
		}
		r.e.endRun()
	})
}

// result is what a blocking SendMessage answers once the run has started or ended.
func (r *run) result() (a2a.SendMessageResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.err != nil:
		return nil, r.err
	case r.msg != nil:
		return r.msg, nil
	case r.full != nil && r.writeErr == nil:
		return nil, a2a.NewError(a2a.ErrInternalError, fmt.Sprintf("the agent could not store task %s's progress: its task store is full; the task was left %s and goes on when the store has room", r.ec.TaskID, r.committed.Task.Status.State))
	case r.writeErr != nil:
		// Checked before committed: a later write that failed must not be
		// answered with the last state stored, as if the task were on its way.
		if r.committed != nil {
			return nil, a2a.NewError(a2a.ErrInternalError, fmt.Sprintf("the agent could not store task %s's progress; it was left %s", r.ec.TaskID, r.committed.Task.Status.State))
		}
		return nil, a2a.NewError(a2a.ErrInternalError, "the agent could not store the task")
	case r.committed != nil:
		return r.committed.Task, nil
	}
	return nil, a2a.NewError(a2a.ErrInvalidAgentResponse, "the agent produced nothing")
}
