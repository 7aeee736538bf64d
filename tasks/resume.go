package tasks

import (
	"context"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// A Resumer is an executor that can take up a task the previous process
// left submitted or working, instead of the engine failing it: a delegation
// whose peer still holds the work, for one. [NewEngine] asks every
// unfinished task's executor.
type Resumer interface {
	// CanResume reports whether Resume can take up the task; when it
	// cannot, the engine fails the task as lost.
	CanResume(task *a2a.Task) bool
	// Resume continues the task in ec.StoredTask. ec.Message is nil: the
	// message that started the task is in its history. It yields events as
	// Execute does after the task exists.
	Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error]
}

// A QuietBound is an executor that may yield nothing for longer than the
// engine's idle timeout ([WithIdleTimeout]) because it waits on work with a
// deadline of its own: a delegation following a peer that reports no
// progress. The engine's watchdog then waits the longer of the two.
type QuietBound interface {
	// QuietFor returns how long the execution of ec may yield nothing
	// before its task is failed; zero or less: the idle timeout.
	QuietFor(ec *a2asrv.ExecutorContext) time.Duration
}

// resumable reports whether the engine's executor takes up task after a restart.
func (e *Engine) resumable(task *a2a.Task) bool {
	r, ok := e.exec.(Resumer)
	return ok && r.CanResume(task)
}

// resume runs the executor's Resume for a task found unfinished at start,
// through the same run machinery as a new message: hub, writer, idle
// watchdog, cancel, Shutdown. The task was admitted before the restart, so
// it takes an execution slot only if one is free rather than wait for it.
func (e *Engine) resume(ctx context.Context, snap *Snapshot) {
	id := snap.Task.ID
	h := newHub(id, snap)
	h.refs = 1 // the run's, released by its finish
	e.mu.Lock()
	e.hubs[id] = h
	e.mu.Unlock()
	ec := &a2asrv.ExecutorContext{TaskID: id, ContextID: snap.Task.ContextID, StoredTask: snap.Task,
		Tenant: snap.Owner.Tenant, User: userOf(snap.Owner)}
	slot := false
	select {
	case e.slots <- struct{}{}:
		slot = true
	default:
	}
	e.beginRun(true)
	h.mu.Lock()
	r := e.newRun(ctx, h, snap.Owner, ec, snap, slot)
	r.resume = true
	h.run = r
	h.mu.Unlock()
	e.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "task resumed after restart", slog.String("task_id", string(id)))
	go r.execute()
}

// userOf is the authenticated user an owner was bound from, or nil for the
// anonymous owner: what the executor saw when the task started.
func userOf(o Owner) *a2asrv.User {
	name, ok := strings.CutPrefix(o.Principal, "user:")
	if !ok {
		return nil
	}
	return a2asrv.NewAuthenticatedUser(name, map[string]any{TenantAttribute: o.Tenant})
}

// detach ends a run at shutdown without ending its task, when the task is
// still submitted or working and the executor can resume it at the next
// start. It reports whether it did; the caller aborts the run otherwise.
func (r *run) detach() bool {
	r.mu.Lock()
	if r.ended || r.cur == nil || final(r.cur.Task.Status.State) || !r.e.resumable(r.cur.Task) {
		r.mu.Unlock()
		return false
	}
	r.ended = true // the executor's last events, answering the cancellation, are not stored
	r.giveUpLocked()
	r.flushLocked()
	r.mu.Unlock()
	r.e.cfg.logger.Info("task left to resume at the next start", slog.String("task_id", string(r.ec.TaskID)))
	r.stop(ErrShutdown)
	r.finish()
	return true
}
