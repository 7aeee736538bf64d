package tasks

import "errors"

// Errors returned by a [Store].
var (
	// ErrNotFound means the task (or push config) does not exist, or belongs
	// to another owner: the two are never told apart.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the task changed since the version the writer read.
	ErrConflict = errors.New("concurrent modification")
	// ErrCorrupt means a stored record could not be decoded.
	ErrCorrupt = errors.New("corrupt record")
	// ErrInvalidPageToken means a ListQuery's PageToken was not made by
	// the store.
	ErrInvalidPageToken = errors.New("invalid page token")
	// ErrClosed is returned by a store's methods after Close.
	ErrClosed = errors.New("store closed")
	// ErrStoreFull means the store is out of room (a full disk or quota, a
	// memory limit) and stored nothing of the write: the same write may
	// succeed later. The engine keeps an acknowledged task's events and
	// writes them again once the store takes them.
	ErrStoreFull = errors.New("store full")
)

// errCanceledByClient is the cause set on an execution's context when the
// client cancels its task.
var errCanceledByClient = errors.New("task canceled by the client")

// errAgentIdle is the cause set when the executor stopped yielding events.
var errAgentIdle = errors.New("agent stopped answering")

// errLeaseLost is the cause set on an execution's context when another
// replica took its task over.
var errLeaseLost = errors.New("another replica took this task over")

// ErrShutdown is the cause ([context.Cause]) with which an execution's
// context ends when [Engine.Shutdown] leaves its task for the next start to
// resume. The executor should leave running what it handed to others (a
// peer's task): it takes it up again then.
var ErrShutdown = errors.New("the agent is shutting down; the task resumes at its next start")

// ErrUnsealable means a stored secret was sealed under a key the store was
// not given (a key rotated out of the config, or another agent's), or was
// altered: it is refused rather than sent anywhere.
var ErrUnsealable = errors.New("push secret cannot be opened")

// ErrInvalidEvent means an executor yielded an event that does not fit the
// task: a wrong id, an update after a final state, an append to an unknown
// artifact. The engine stops the execution and fails the task.
var ErrInvalidEvent = errors.New("invalid event")
