package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"
)

// SharedStore is a [Store] that several engines (replicas of one agent)
// share, with what they need to share its tasks: a lease per running task,
// the tails of event logs, and cancel requests between replicas.
// The Redis store (package tasks/redisstore) is one; an engine on any other
// store runs alone.
type SharedStore interface {
	Store
	// Claim takes a task's lease for holder unless someone holds it.
	Claim(ctx context.Context, id a2a.TaskID, holder string, ttl time.Duration) (bool, error)
	// Renew extends holder's leases and returns the ids someone else holds.
	Renew(ctx context.Context, ids []a2a.TaskID, holder string, ttl time.Duration) ([]a2a.TaskID, error)
	// Release gives up holder's lease of a task.
	Release(ctx context.Context, id a2a.TaskID, holder string) error
	// Holder returns who holds a task's lease, "" for nobody.
	Holder(ctx context.Context, id a2a.TaskID) (string, error)
	// Tail waits up to block for events after the given sequence numbers.
	Tail(ctx context.Context, after map[a2a.TaskID]uint64, block time.Duration) (map[a2a.TaskID][]Event, error)
	// RequestCancel asks the replica running a task to cancel it; it
	// returns how many replicas heard.
	RequestCancel(ctx context.Context, id a2a.TaskID) (int64, error)
	// WatchCancels calls f for every cancel request until ctx ends.
	WatchCancels(ctx context.Context, f func(a2a.TaskID)) error
}

// tailBlock is how long one read of the followed logs waits for news; a
// task followed meanwhile waits at most this long for its first event.
const tailBlock = 250 * time.Millisecond

// replica is what an engine on a [SharedStore] adds: every task it runs is
// under a lease it renews every ttl/3; every ttl/2 it sweeps the unfinished
// tasks and takes over those whose lease expired (their replica died), so a
// task left by a dead replica ends (resumed or failed) within about 1.5 ttl.
// Tasks that run elsewhere are followed by tailing their logs, and a cancel
// of one is sent to the replica that runs it.
type replica struct {
	store SharedStore
	id    string
	ttl   time.Duration

	mu    sync.Mutex
	held  map[a2a.TaskID]bool // leases this replica holds
	tails map[a2a.TaskID]*hub // hubs of tasks running elsewhere
	poke  chan struct{}       // a tail was added
	stop  context.CancelFunc
	wg    sync.WaitGroup
	fails map[string]bool // loops whose last store call failed, to log changes only
}

// startReplica makes e one replica among those sharing s: it takes over
// the unfinished tasks nobody holds (the start's recovery), then keeps its
// leases, the sweep, the tails and the cancel requests going until Shutdown.
func (e *Engine) startReplica(ctx context.Context, s SharedStore) error {
	e.rep = &replica{store: s, id: uuid.NewString(), ttl: e.cfg.leaseTTL,
		held: make(map[a2a.TaskID]bool), tails: make(map[a2a.TaskID]*hub), poke: make(chan struct{}, 1),
		fails: make(map[string]bool)}
	if err := e.sweep(ctx); err != nil {
		return fmt.Errorf("recover tasks: %w", err)
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.rep.stop = stop
	loops := []func(context.Context){e.renewLoop, e.sweepLoop, e.tailLoop, e.cancelLoop}
	e.rep.wg.Add(len(loops))
	for _, loop := range loops {
		go func() {
			defer e.rep.wg.Done()
			loop(lctx)
		}()
	}
	return nil
}

// stopReplica ends the replica's loops. Shutdown calls it once the runs
// ended, so their leases were renewed to the last.
func (e *Engine) stopReplica() {
	if e.rep == nil || e.rep.stop == nil {
		return
	}
	e.rep.stop()
	e.rep.wg.Wait()
}

// every calls f every d until ctx ends or the store is closed (an engine
// whose store was closed without a Shutdown).
func every(ctx context.Context, d time.Duration, f func(context.Context) error) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if errors.Is(f(ctx), ErrClosed) {
				return
			}
		}
	}
}

// report logs a loop's store failure once, and its recovery once.
func (e *Engine) report(ctx context.Context, loop string, err error) {
	e.rep.mu.Lock()
	was := e.rep.fails[loop]
	e.rep.fails[loop] = err != nil
	e.rep.mu.Unlock()
	switch {
	case err != nil && !was && ctx.Err() == nil:
		e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "replica "+loop+" failed", slog.Any("error", err))
	case err == nil && was:
		e.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "replica "+loop+" works again")
	}
}

// claimTask takes the lease of the task a message starts or continues. A
// continued task's snapshot is read again under the lease, so the checks
// that follow see what the replica that ran it last wrote. Without a
// shared store it does nothing.
func (e *Engine) claimTask(ctx context.Context, id a2a.TaskID, h *hub, owner Owner, base *Snapshot) (*Snapshot, bool, error) {
	if e.rep == nil {
		return base, false, nil
	}
	if h != nil {
		h.mu.Lock()
		local := h.run != nil
		h.mu.Unlock()
		if local { // running here: the caller refuses the message
			return base, false, nil
		}
	}
	ok, err := e.rep.store.Claim(ctx, id, e.rep.id, e.rep.ttl)
	if err != nil {
		return nil, false, e.publicError(ctx, "start task", id, err) // the lease is ours to know
	}
	if !ok {
		return nil, false, a2a.NewError(a2a.ErrUnsupportedOperation,
			fmt.Sprintf("task %s is running on another replica; only a task waiting for input takes a new message", id))
	}
	e.rep.mu.Lock()
	e.rep.held[id] = true
	e.rep.mu.Unlock()
	if base == nil {
		return nil, true, nil
	}
	cur, err := e.store.Get(ctx, owner, id)
	if err != nil {
		e.unclaim(id)
		return nil, false, e.publicError(ctx, "get task", id, err)
	}
	h.mu.Lock()
	if cur.Version > version(h.snap) {
		h.snap, h.tail = cur, nil
		h.signalLocked()
	}
	cur = h.snap
	h.mu.Unlock()
	return cur, true, nil
}

// unclaim gives up this replica's lease of a task, if it holds it.
func (e *Engine) unclaim(id a2a.TaskID) {
	if e.rep == nil {
		return
	}
	e.rep.mu.Lock()
	held := e.rep.held[id]
	delete(e.rep.held, id)
	e.rep.mu.Unlock()
	if !held {
		return
	}
	// An unreleased lease only delays nothing: the task is no longer
	// unfinished, or the sweep takes it over once the lease expires.
	if err := e.rep.store.Release(context.Background(), id, e.rep.id); err != nil {
		e.cfg.logger.Warn("release task lease", slog.String("task_id", string(id)), slog.Any("error", err))
	}
}

// finishLease releases the lease of an execution that ended.
func (r *run) finishLease() {
	if r.slot || r.resume { // executions; a cancellation of a waiting task holds none
		r.e.unclaim(r.h.taskID())
	}
}

// renewLoop keeps this replica's leases alive and stops the executions of
// tasks another replica took over (this one was out of reach too long).
func (e *Engine) renewLoop(ctx context.Context) {
	every(ctx, e.rep.ttl/3, func(ctx context.Context) error {
		e.rep.mu.Lock()
		ids := make([]a2a.TaskID, 0, len(e.rep.held))
		for id := range e.rep.held {
			ids = append(ids, id)
		}
		e.rep.mu.Unlock()
		lost, err := e.rep.store.Renew(ctx, ids, e.rep.id, e.rep.ttl)
		e.report(ctx, "lease renewal", err)
		for _, id := range lost {
			e.rep.mu.Lock()
			delete(e.rep.held, id)
			e.rep.mu.Unlock()
			e.mu.Lock()
			h := e.hubs[id]
			e.mu.Unlock()
			if h == nil {
				continue
			}
			h.mu.Lock()
			r := h.run
			h.mu.Unlock()
			if r != nil {
				e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "task lease lost", slog.String("task_id", string(id)))
				r.stop(errLeaseLost)
			}
		}
		return err
	})
}

func (e *Engine) sweepLoop(ctx context.Context) {
	every(ctx, e.rep.ttl/2, func(ctx context.Context) error {
		err := e.sweep(ctx)
		e.report(ctx, "sweep", err)
		return err
	})
}

// sweep takes over every unfinished task whose lease is free: its replica
// died (or it died before taking one). Each is resumed when the executor
// can, else failed with a status message saying why.
func (e *Engine) sweep(ctx context.Context) error {
	e.life.Lock()
	closing := e.closing
	e.life.Unlock()
	if closing {
		return nil
	}
	lost, err := e.store.Unfinished(ctx)
	if err != nil {
		return err
	}
	for _, s := range lost {
		id := s.Task.ID
		e.rep.mu.Lock()
		mine := e.rep.held[id]
		e.rep.mu.Unlock()
		if mine {
			continue
		}
		ok, err := e.rep.store.Claim(ctx, id, e.rep.id, e.rep.ttl)
		if err != nil {
			return err
		}
		if !ok { // alive on another replica
			continue
		}
		e.rep.mu.Lock()
		e.rep.held[id] = true
		e.rep.mu.Unlock()
		if err := e.takeOver(ctx, s.Owner, id); err != nil {
			e.unclaim(id)
			return err
		}
	}
	return nil
}

// takeOver resumes or fails an unfinished task whose lease this replica
// just took. A resumed run keeps the lease until it ends.
func (e *Engine) takeOver(ctx context.Context, owner Owner, id a2a.TaskID) error {
	snap, err := e.store.Get(ctx, owner, id) // read under the lease: final
	if errors.Is(err, ErrNotFound) {
		e.unclaim(id)
		return nil
	}
	if err != nil {
		return err
	}
	if !IsUnfinished(snap.Task.Status.State) { // it ended between the list and the claim
		e.unclaim(id)
		return nil
	}
	if e.resumable(snap.Task) {
		e.resume(ctx, snap)
		return nil
	}
	ev := a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateFailed,
		agentMessage(snap.Task, "The agent replica running this task stopped; its work was lost. Send the request again."))
	next, err := Apply(snap, ev, time.Now())
	if err != nil {
		return fmt.Errorf("take over task %s: %w", id, err)
	}
	if err := e.append(ctx, snap, next, []a2a.Event{ev}); err != nil {
		return fmt.Errorf("take over task %s: %w", id, err)
	}
	if f := e.cfg.onCommit; f != nil { // push delivery of the failure
		f(id)
	}
	e.unclaim(id)
	e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "task failed: its replica stopped", slog.String("task_id", string(id)))
	return nil
}

// followRemote starts following the log of a task that is not final and
// runs on no execution of this engine (a new hub, made from the store):
// another replica writes its events, which reach the hub's waiters in order.
func (e *Engine) followRemote(h *hub) { e.tailHub(h, final) }

// awaitTurn follows the log of a task that waits for its client, until its
// next turn is final again: the turn may run on another replica, and this
// one's subscribers must see it.
func (e *Engine) awaitTurn(h *hub) { e.tailHub(h, a2a.TaskState.Terminal) }

// tailHub feeds h from the shared log unless its task's state is done.
func (e *Engine) tailHub(h *hub, done func(a2a.TaskState) bool) {
	if e.rep == nil {
		return
	}
	h.mu.Lock()
	if h.run != nil || h.snap == nil || done(h.snap.Task.Status.State) {
		h.mu.Unlock()
		return
	}
	h.remote = true
	h.mu.Unlock()
	e.rep.mu.Lock()
	e.rep.tails[h.id] = h
	e.rep.mu.Unlock()
	select {
	case e.rep.poke <- struct{}{}:
	default:
	}
}

// unfollow stops following h's log: nobody holds it any longer.
func (e *Engine) unfollow(h *hub) {
	if e.rep == nil {
		return
	}
	e.rep.mu.Lock()
	if e.rep.tails[h.id] == h {
		delete(e.rep.tails, h.id)
	}
	e.rep.mu.Unlock()
}

// tailLoop reads the logs of every followed task in one blocking read and
// publishes what came to their hubs.
func (e *Engine) tailLoop(ctx context.Context) {
	for ctx.Err() == nil {
		after := make(map[a2a.TaskID]uint64)
		hubs := make(map[a2a.TaskID]*hub)
		e.rep.mu.Lock()
		for id, h := range e.rep.tails {
			h.mu.Lock()
			if h.remote {
				after[id], hubs[id] = h.snap.Version, h
			} else {
				delete(e.rep.tails, id)
			}
			h.mu.Unlock()
		}
		e.rep.mu.Unlock()
		if len(after) == 0 {
			idle := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-e.rep.poke:
			case <-idle.C:
				// An engine whose store was closed without a Shutdown ends here.
				if _, err := e.rep.store.Tail(ctx, nil, 0); errors.Is(err, ErrClosed) {
					return
				}
			}
			idle.Stop()
			continue
		}
		got, err := e.rep.store.Tail(ctx, after, tailBlock)
		e.report(ctx, "tail", err)
		if errors.Is(err, ErrClosed) {
			return
		}
		if err != nil {
			pause(ctx, tailBlock)
			continue
		}
		for id, evs := range got {
			e.deliver(hubs[id], evs)
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// deliver publishes events another replica stored to h, each exactly once
// and in order; a final state ends the following.
func (e *Engine) deliver(h *hub, evs []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		if h.run != nil || !h.remote { // an execution here publishes its own events
			break
		}
		if ev.Seq != h.snap.Version+1 {
			continue
		}
		next, err := Apply(h.snap, ev.Event, time.Now())
		if err != nil {
			e.cfg.logger.Error("follow task events", slog.String("task_id", string(h.id)), slog.Any("error", err))
			h.remote = false
			break
		}
		h.publishLocked(next, []Event{ev})
	}
	if h.run != nil || final(h.snap.Task.Status.State) {
		h.remote = false
	}
	if !h.remote {
		h.signalLocked()
	}
}

// cancelLoop hears cancel requests of other replicas.
func (e *Engine) cancelLoop(ctx context.Context) {
	for ctx.Err() == nil {
		err := e.rep.store.WatchCancels(ctx, func(id a2a.TaskID) { e.cancelRequested(ctx, id) })
		if errors.Is(err, ErrClosed) {
			return
		}
		e.report(ctx, "cancel watch", err)
		pause(ctx, tailBlock)
	}
}

// cancelRequested cancels a task another replica was asked to cancel, if it
// runs here.
func (e *Engine) cancelRequested(ctx context.Context, id a2a.TaskID) {
	e.mu.Lock()
	h := e.hubs[id]
	if h != nil {
		h.refs++
	}
	e.mu.Unlock()
	if h == nil {
		return
	}
	h.mu.Lock()
	r := h.run
	h.mu.Unlock()
	if r == nil || !(r.slot || r.resume) {
		e.release(id, h)
		return
	}
	go func() {
		defer e.release(id, h)
		cctx, cancel := context.WithTimeout(ctx, e.rep.ttl)
		defer cancel()
		if _, _, err := r.cancel(cctx, nil); err != nil {
			e.cfg.logger.Warn("cancel requested by another replica", slog.String("task_id", string(id)), slog.Any("error", err))
		}
	}()
}

// cancelElsewhere cancels a task that runs on another replica: it asks that
// replica and waits, up to one lease TTL, for the task to end. done is false
// when the caller should cancel here: the task runs here or nowhere, or the
// replica running it did not answer in time (the caller's write of
// canceled then wins over its next one, which is refused as a conflict).
func (e *Engine) cancelElsewhere(ctx context.Context, h *hub, id a2a.TaskID) (t *a2a.Task, done bool, err error) {
	if e.rep == nil {
		return nil, false, nil
	}
	h.mu.Lock()
	local := h.run != nil
	h.mu.Unlock()
	if local {
		return nil, false, nil
	}
	holder, err := e.rep.store.Holder(ctx, id)
	if err != nil {
		return nil, true, e.publicError(ctx, "cancel task", id, err)
	}
	if holder == "" || holder == e.rep.id {
		return nil, false, nil
	}
	e.followRemote(h)
	// How many heard is no answer: a Cluster counts only one node's listeners.
	if _, err := e.rep.store.RequestCancel(ctx, id); err != nil {
		return nil, true, e.publicError(ctx, "cancel task", id, err)
	}
	timeout := time.NewTimer(e.rep.ttl)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		snap, wake, remote := h.snap, h.wake, h.remote
		h.mu.Unlock()
		switch s := snap.Task.Status.State; {
		case s == a2a.TaskStateCanceled:
			return snap.Task, true, nil
		case s.Terminal():
			return nil, true, a2a.NewError(a2a.ErrTaskNotCancelable, fmt.Sprintf("task %s is %s and cannot be canceled", id, stateName(s)))
		case !remote:
			return nil, false, nil
		}
		select {
		case <-wake:
		case <-timeout.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
}

// writtenElsewhere handles a write of r refused as a conflict because
// another replica wrote the task meanwhile (it took the task over, or
// canceled it when this replica did not answer): it publishes what that
// replica wrote and returns the task as stored, which ends r. It returns
// nil when the conflict is not that (or without replicas).
func (e *Engine) writtenElsewhere(r *run, prev *Snapshot, err error) *Snapshot {
	if e.rep == nil || prev == nil || !errors.Is(err, ErrConflict) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), e.rep.ttl)
	defer cancel()
	evs, rerr := e.store.Events(ctx, r.owner, r.ec.TaskID, prev.Version)
	if rerr != nil || len(evs) == 0 {
		return nil
	}
	snap := prev
	for _, ev := range evs {
		next, aerr := Apply(snap, ev.Event, time.Now())
		if aerr != nil {
			return nil
		}
		snap = next
	}
	r.h.mu.Lock()
	r.h.publishLocked(snap, evs)
	r.h.mu.Unlock()
	e.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "task written by another replica; this execution stops",
		slog.String("task_id", string(r.ec.TaskID)), slog.String("state", stateName(snap.Task.Status.State)))
	return snap
}
