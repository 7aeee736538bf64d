package tasks

import (
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// final reports whether a task in state s takes no more events from the
// current execution: terminal states and the interrupted ones that wait for
// the client.
func final(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// interrupted reports whether a task in state s waits for its client.
func interrupted(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

func validState(s a2a.TaskState) bool {
	switch s {
	case a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCompleted, a2a.TaskStateCanceled, a2a.TaskStateFailed, a2a.TaskStateRejected:
		return true
	}
	return false
}

// Apply is the task state machine: it returns the snapshot that results
// from ev, leaving prev untouched: only what the event changes is copied, so
// a store may keep what it encoded of the parts the two share. prev is nil
// for a task that does not exist yet, in which case ev must be the task
// itself. A sequence the machine refuses is [ErrInvalidEvent].
func Apply(prev *Snapshot, ev a2a.Event, now time.Time) (*Snapshot, error) {
	if prev == nil {
		t, ok := ev.(*a2a.Task)
		if !ok {
			return nil, fmt.Errorf("%w: the first event of a new task must be the task, got %T", ErrInvalidEvent, ev)
		}
		if t.ID == "" || t.ContextID == "" || !validState(t.Status.State) {
			return nil, fmt.Errorf("%w: new task without id, context id or valid state", ErrInvalidEvent)
		}
		return &Snapshot{Task: t, Version: 1, Updated: statusTime(t.Status, now)}, nil
	}
	cur := prev.Task
	if cur.Status.State.Terminal() {
		return nil, fmt.Errorf("%w: task %s is already %s", ErrInvalidEvent, cur.ID, stateName(cur.Status.State))
	}
	info := ev.TaskInfo()
	if info.TaskID != cur.ID || info.ContextID != cur.ContextID {
		return nil, fmt.Errorf("%w: event for task %q context %q on task %q context %q",
			ErrInvalidEvent, info.TaskID, info.ContextID, cur.ID, cur.ContextID)
	}
	// The snapshot and its task copy share one allocation.
	pair := &struct {
		snap Snapshot
		task a2a.Task
	}{snap: *prev, task: *cur}
	next, t := &pair.snap, &pair.task
	next.Version++
	next.Task = t
	switch e := ev.(type) {
	case *a2a.Task:
		if !validState(e.Status.State) {
			return nil, fmt.Errorf("%w: task with state %q", ErrInvalidEvent, e.Status.State)
		}
		if d := firstDigest(cur); d != "" && firstDigest(e) == "" {
			// The digest is the engine's, not the executor's: a task it yields whole keeps it.
			c := *e
			c.Metadata = mergeMeta(e.Metadata, map[string]any{ContentDigestKey: d})
			e = &c
		}
		next.Task = e
		next.Updated = statusTime(e.Status, now)
	case *a2a.TaskStatusUpdateEvent:
		if !validState(e.Status.State) {
			return nil, fmt.Errorf("%w: status update with state %q", ErrInvalidEvent, e.Status.State)
		}
		// The previous status message becomes history, as in a2a-go's own handler.
		if cur.Status.Message != nil {
			next.history = appendHistory(prev, cur.Status.Message)
			t.History = slices.Clip(next.history)
		}
		t.Status = e.Status
		if t.Status.Timestamp == nil {
			ts := now
			t.Status.Timestamp = &ts
		}
		next.Updated = *t.Status.Timestamp
		if len(e.Metadata) > 0 {
			t.Metadata = mergeMeta(cur.Metadata, e.Metadata)
		}
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact == nil || e.Artifact.ID == "" {
			return nil, fmt.Errorf("%w: artifact update without an artifact id", ErrInvalidEvent)
		}
		i := slices.IndexFunc(cur.Artifacts, func(a *a2a.Artifact) bool { return a.ID == e.Artifact.ID })
		var arts []*a2a.Artifact
		switch {
		case e.Append && i < 0:
			return nil, fmt.Errorf("%w: append to unknown artifact %s", ErrInvalidEvent, e.Artifact.ID)
		case e.Append:
			arts = slices.Clone(cur.Artifacts)
			merged := *arts[i]
			next.parts = appendParts(prev, merged.Parts, e.Artifact.Parts)
			merged.Parts = slices.Clip(next.parts)
			if len(e.Artifact.Metadata) > 0 {
				merged.Metadata = mergeMeta(merged.Metadata, e.Artifact.Metadata)
			}
			arts[i] = &merged
		case i >= 0:
			arts = slices.Clone(cur.Artifacts)
			arts[i] = e.Artifact
		default:
			// In place past prev's length: prev never sees it, and a snapshot
			// has one successor only (one writer per task), so no other
			// successor can write the same slot. Cloning here made a task's
			// artifacts cost O(n²).
			arts = append(cur.Artifacts, e.Artifact)
		}
		t.Artifacts = arts
	case *a2a.Message:
		return nil, fmt.Errorf("%w: a message after task %s was created", ErrInvalidEvent, cur.ID)
	default:
		return nil, fmt.Errorf("%w: unknown event type %T", ErrInvalidEvent, ev)
	}
	return next, nil
}

// appendHistory returns prev's history with m appended, in place in the
// spare capacity of the array prev's own Apply left behind when prev's task
// still shows that array, so a long task's history costs amortized O(1) per
// event instead of a copy of it. The task's History itself is always clipped:
// an executor that appends to the task it is handed reallocates instead of
// writing into the slot the next event takes.
func appendHistory(prev *Snapshot, m *a2a.Message) []*a2a.Message {
	h, spare := prev.Task.History, prev.history
	if len(h) > 0 && len(spare) == len(h) && &spare[0] == &h[0] {
		return append(spare, m)
	}
	return append(slices.Clip(h), m)
}

// appendParts returns parts (an artifact's, in prev's task) with more
// appended, in place in the spare capacity prev's own Apply left behind when
// parts still is that array: streaming one artifact in n chunks costs O(n),
// not O(n²). As for the history, the artifact's Parts are always clipped.
func appendParts(prev *Snapshot, parts, more []*a2a.Part) []*a2a.Part {
	spare := prev.parts
	if len(parts) > 0 && len(spare) == len(parts) && &spare[0] == &parts[0] {
		return append(spare, more...)
	}
	return append(slices.Clip(parts), more...)
}

func statusTime(s a2a.TaskStatus, now time.Time) time.Time {
	if s.Timestamp != nil {
		return *s.Timestamp
	}
	return now
}

func mergeMeta(a, b map[string]any) map[string]any {
	m := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// stateName is the short lower-case name used in messages ("completed").
func stateName(s a2a.TaskState) string {
	switch s {
	case a2a.TaskStateSubmitted:
		return "submitted"
	case a2a.TaskStateWorking:
		return "working"
	case a2a.TaskStateInputRequired:
		return "input-required"
	case a2a.TaskStateAuthRequired:
		return "auth-required"
	case a2a.TaskStateCompleted:
		return "completed"
	case a2a.TaskStateCanceled:
		return "canceled"
	case a2a.TaskStateFailed:
		return "failed"
	case a2a.TaskStateRejected:
		return "rejected"
	}
	return string(s)
}
