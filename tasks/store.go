package tasks

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Owner is the caller a task is bound to at creation. Every later read and
// write of the task is checked against it.
type Owner struct {
	// Principal identifies the caller; all anonymous callers share one.
	Principal string `json:"principal"`
	// Tenant is the A2A tenant the task was created under.
	Tenant string `json:"tenant,omitempty"`
}

// Snapshot is a task as of one point in its event log. A Snapshot handed out
// by a Store or the Engine is immutable: callers must copy before changing.
type Snapshot struct {
	// Task is the task as of Version.
	Task *a2a.Task
	// Owner is the caller the task is bound to.
	Owner Owner
	// Version is the sequence number of the last event applied; the first
	// event of a task has sequence 1.
	Version uint64
	// Updated is when the task's status last changed; lists are ordered by it.
	Updated time.Time

	// history is Task.History with the spare capacity Apply appends the
	// next history entry into (see appendHistory).
	history []*a2a.Message
	// parts is, likewise, the Parts of the artifact the last Apply appended
	// to, with spare capacity (see appendParts).
	parts []*a2a.Part
}

// IsUnfinished reports whether a task in state s is one [Store.Unfinished]
// returns: submitted or working.
func IsUnfinished(s a2a.TaskState) bool {
	return s == a2a.TaskStateSubmitted || s == a2a.TaskStateWorking
}

// Event is one entry of a task's event log.
type Event struct {
	// Seq is the event's position in the log, from 1.
	Seq uint64
	// Event is the A2A event as the executor yielded it (redacted where the
	// executor asked for it).
	Event a2a.Event
}

// ListQuery selects one owner's tasks, newest status first.
type ListQuery struct {
	// Owner is whose tasks are listed; no other owner's ever are.
	Owner Owner
	// ContextID, when set, keeps the tasks of that context.
	ContextID string
	// State, when set, keeps the tasks in that state.
	State a2a.TaskState
	// UpdatedAfter, when set, keeps tasks whose status changed after it.
	UpdatedAfter *time.Time
	// PageSize is the number of tasks per page (1 to 100).
	PageSize int
	// PageToken continues a previous page; empty for the first one.
	PageToken string
	// HistoryLength, when set, is the most history entries (the newest)
	// the page's snapshots need; a store may leave the older ones out.
	HistoryLength *int
	// SkipArtifacts says the page's snapshots need no artifacts; a store
	// may leave them out.
	SkipArtifacts bool
}

// ListPage is one page of a [ListQuery].
type ListPage struct {
	// Tasks are the page's tasks, newest status first.
	Tasks []*Snapshot
	// TotalSize counts every task the query selects, on all pages.
	TotalSize int
	// NextPageToken continues with the next page; empty on the last one.
	NextPageToken string
}

// PushDelivery is a push config of one task with the state of its
// deliveries: every event of the task's log up to Delivered has been
// delivered or dead-lettered, in order.
type PushDelivery struct {
	// Owner is the owner of the task, and so of the config.
	Owner Owner `json:"owner"`
	// Config is the push config, its secrets sealed at rest.
	Config *a2a.PushConfig `json:"config"`
	// Delivered is the sequence number of the last event handled.
	Delivered uint64 `json:"delivered"`
	// Attempts counts the tries of event Delivered+1 while it is retried.
	Attempts int `json:"attempts,omitempty"`
	// FirstAttempt is when event Delivered+1 was first tried.
	FirstAttempt time.Time `json:"first_attempt,omitzero"`
	// NextAttempt is when event Delivered+1 is tried again.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	// LastError is why the last try of event Delivered+1 failed.
	LastError string `json:"last_error,omitempty"`
	// DeliveredCount counts the events delivered.
	DeliveredCount int `json:"delivered_count,omitempty"`
	// Dead lists the events whose delivery was given up.
	Dead []DeadDelivery `json:"dead,omitempty"`
	// Retries are the operators' requests to deliver now that the delivery
	// worker has not yet taken. UpdatePushDelivery leaves them as stored:
	// the stores' AddPushRetry and RemovePushRetry alone change them, so a
	// worker writing its state never loses a request made meanwhile.
	Retries []PushRetry `json:"retries,omitempty"`
}

// PushRetry is an operator's request to deliver an event of a push config
// now: a dead letter once more, or the event being retried without waiting
// out its backoff. It is stored with the config until the delivery worker
// has handled it, so a restart does not lose it.
type PushRetry struct {
	// ID names the request.
	ID string `json:"id"`
	// Seq is the event to deliver; 0 asks for every dead letter of the
	// config and the event being retried, if any.
	Seq uint64 `json:"seq,omitempty"`
	// By is the operator who asked (the caller's principal).
	By string `json:"by"`
	// At is when the request was made.
	At time.Time `json:"at"`
}

// A PushJob is one entry of the push delivery queue that replicas share
// (the Redis store's): "deliver what is pending for this task".
type PushJob struct {
	// ID is the entry's ID in the queue, which acknowledges it.
	ID string
	// Task is the task whose deliveries are pending.
	Task a2a.TaskID
}

// DeadDelivery is an event whose delivery was given up.
type DeadDelivery struct {
	// Seq is the event's sequence number.
	Seq uint64 `json:"seq"`
	// Attempts counts the tries it got.
	Attempts int `json:"attempts"`
	// Reason is why it was given up (the last error, or the deadline).
	Reason string `json:"reason"`
	// At is when it was given up.
	At time.Time `json:"at"`
}

// A HistoryReader is a [Store] that can read a task with only the newest
// entries of its history, so that a GetTask asking for a few costs the same
// whatever the history's length. The engine uses it when the store has it.
type HistoryReader interface {
	// GetRecent is [Store.Get] with at most historyLength entries of
	// Task.History, the newest; the rest of the snapshot is whole.
	GetRecent(ctx context.Context, owner Owner, id a2a.TaskID, historyLength int) (*Snapshot, error)
}

// Store keeps tasks, their event logs and their push configs. Every method
// is safe for concurrent use. Implementations must make [Store.Append]
// atomic: the events and the snapshot are written together or not at all,
// and once Append returns nil they survive a crash.
type Store interface {
	// Append adds events to the end of the task's log and replaces its
	// snapshot. next.Version must be the stored version plus len(events)
	// (a new task has stored version 0); otherwise it fails with ErrConflict.
	Append(ctx context.Context, next *Snapshot, events []a2a.Event) error
	// Get returns the task's latest snapshot, or ErrNotFound when it does
	// not exist or belongs to another owner.
	Get(ctx context.Context, owner Owner, id a2a.TaskID) (*Snapshot, error)
	// OwnerOf returns the owner of a task, for the one caller that may act
	// on another's task: an approver answering an approval request.
	OwnerOf(ctx context.Context, id a2a.TaskID) (Owner, error)
	// Events returns the task's log entries with a sequence number above after.
	Events(ctx context.Context, owner Owner, id a2a.TaskID, after uint64) ([]Event, error)
	// List returns one page of the owner's tasks, newest status first.
	List(ctx context.Context, q ListQuery) (*ListPage, error)
	// Unfinished returns every task, of any owner, whose state is submitted or
	// working: after a restart these are tasks whose execution was lost.
	Unfinished(ctx context.Context) ([]*Snapshot, error)

	// PutPushConfig stores (or replaces) a push config of the task.
	PutPushConfig(ctx context.Context, owner Owner, cfg *a2a.PushConfig) error
	// GetPushConfig returns one push config, or ErrNotFound.
	GetPushConfig(ctx context.Context, owner Owner, task a2a.TaskID, id string) (*a2a.PushConfig, error)
	// ListPushConfigs returns the task's push configs ordered by id.
	ListPushConfigs(ctx context.Context, owner Owner, task a2a.TaskID) ([]*a2a.PushConfig, error)
	// DeletePushConfig removes one push config; ErrNotFound if absent.
	DeletePushConfig(ctx context.Context, owner Owner, task a2a.TaskID, id string) error

	// PushDeliveries returns the push configs of a task, of any owner, with
	// their delivery state; with task empty, those of every task.
	PushDeliveries(ctx context.Context, task a2a.TaskID) ([]*PushDelivery, error)
	// UpdatePushDelivery stores the delivery state of d's config, leaving
	// the config itself and its Retries as they are; ErrNotFound if the
	// config was deleted.
	UpdatePushDelivery(ctx context.Context, d *PushDelivery) error

	// Close releases the store. Calls after Close fail.
	Close() error
}
