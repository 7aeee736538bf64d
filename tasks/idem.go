package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"

	"github.com/handoff-a2a/handoff/internal/jcs"
)

// ContentDigestKey is the task metadata key under which a task started by a
// message with an idempotency key keeps the digest of that message's
// content ([contentDigest]), so that a repeat with other content is refused,
// after a restart too.
const ContentDigestKey = "handoff/idempotency-digest"

// contentDigest is "sha256:" and the hex SHA-256 of the RFC 8785 canonical
// JSON of a message's parts: what a repeat of the message with the same
// idempotency key must send again. Ids, metadata (an envelope's deadline,
// trace context) and the role may differ between repeats.
func contentDigest(m *a2a.Message) (string, error) {
	b, err := jcs.Append(nil, m.Parts)
	if err != nil {
		return "", fmt.Errorf("digest message %s: %w", m.ID, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// firstDigest is the content digest task t's first message had, or "" for
// a task without one (started without a key, or before digests were kept).
func firstDigest(t *a2a.Task) string {
	d, _ := t.Metadata[ContentDigestKey].(string)
	return d
}

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

// sameContent refuses a repeat whose content digest differs from the one
// the key's first message had: the caller reused a key for another request,
// and answering with the first task would hide that.
func sameContent(h *hub, digest string) error {
	h.mu.Lock()
	first := ""
	if h.snap != nil {
		first = firstDigest(h.snap.Task)
	} else if h.run != nil {
		first = h.run.digest
	}
	h.mu.Unlock()
	if first == "" || first == digest {
		return nil
	}
	return a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf(
		"idempotency key reused with different content: the first message with this key (task %s) has digest %s", h.id, first)).
		WithDetails(map[string]any{"taskId": string(h.id), "digest": first})
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
func (e *Engine) streamRepeat(ctx context.Context, h *hub, owner Owner, flush func()) iter.Seq2[a2a.Event, error] {
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
		e.follow(ctx, h, r, owner, version(snap), flush, yield)
	}
}
