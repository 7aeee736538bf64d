package tasks

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"
)

// idempotencySpace is the UUID namespace of task ids derived from keys.
var idempotencySpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/handoff-a2a/handoff/tasks/idempotency"))

// keyedTaskID is the task a caller's message with key starts: the same
// for every repeat, and different for another caller with the same key.
func keyedTaskID(o Owner, key string) a2a.TaskID {
	name := o.Principal + "\x00" + o.Tenant + "\x00" + key
	return a2a.TaskID(uuid.NewSHA1(idempotencySpace, []byte(name)).String())
}

// messageKey is the idempotency key of a new message, or "".
func (e *Engine) messageKey(m *a2a.Message) string {
	if e.cfg.idempotencyKey == nil || m == nil || m.TaskID != "" {
		return ""
	}
	return e.cfg.idempotencyKey(m)
}

// existing returns the hub of task id when the task exists or is being
// created, with a reference the caller must release, or nil when it does
// not exist. Callers hold e.keyed, so no keyed task is created meanwhile.
func (e *Engine) existing(ctx context.Context, owner Owner, id a2a.TaskID) (*hub, error) {
	e.mu.Lock()
	if h := e.hubs[id]; h != nil {
		h.refs++
		e.mu.Unlock()
		return h, nil
	}
	e.mu.Unlock()
	snap, err := e.store.Get(ctx, owner, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, e.publicError(ctx, "get task", id, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.hubs[id]
	if h == nil {
		h = newHub(id, snap)
		e.hubs[id] = h
	}
	h.refs++
	return h, nil
}

// repeatOf checks that a repeated message's task is the caller's: ids are
// derived from the caller, so only a forged random id could differ.
func repeatOf(h *hub, owner Owner) (*Snapshot, *run, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	snap, r := h.snap, h.run
	switch {
	case snap != nil && snap.Owner != owner, snap == nil && (r == nil || r.owner != owner):
		return nil, nil, a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", h.id))
	}
	return snap, r, nil
}

// sendRepeat answers a blocking send whose key already started task h:
// as the first send would, once its run started or ended.
func (e *Engine) sendRepeat(ctx context.Context, h *hub, owner Owner, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	defer e.release(h.id, h)
	snap, r, err := repeatOf(h, owner)
	if err != nil {
		return nil, err
	}
	if r != nil {
		return r.answer(ctx, req.Config)
	}
	var hl *int
	if req.Config != nil {
		hl = req.Config.HistoryLength
	}
	return view(snap.Task, hl, true), nil
}

// streamRepeat follows the task a repeated streaming message's key already
// started: the task as it stands, then its events, as a subscription.
func (e *Engine) streamRepeat(ctx context.Context, h *hub, owner Owner) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		defer e.release(h.id, h)
		snap, r, err := repeatOf(h, owner)
		if err != nil {
			yield(nil, err)
			return
		}
		if snap != nil {
			if !yield(snap.Task, nil) || (r == nil && final(snap.Task.Status.State)) {
				return
			}
		}
		e.follow(ctx, h, r, owner, version(snap), yield)
	}
}
