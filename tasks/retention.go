package tasks

import (
	"bytes"
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Retention says how long finished tasks (completed, failed, canceled,
// rejected) are kept after their status last changed. The zero Retention
// keeps every task forever.
type Retention struct {
	// Finished is how long a finished task is kept; 0 keeps it forever.
	Finished time.Duration
	// Tenants replaces Finished for the tasks of a tenant (the A2A tenant
	// they were created under; "" is the default tenant). 0 keeps that
	// tenant's tasks forever.
	Tenants map[string]time.Duration
}

// Window returns how long the finished tasks of tenant are kept; 0: forever.
func (r Retention) Window(tenant string) time.Duration {
	if w, ok := r.Tenants[tenant]; ok {
		return w
	}
	return r.Finished
}

// Expired reports whether a task of tenant in state, whose status last
// changed at updated, is past its window at now.
func (r Retention) Expired(tenant string, state a2a.TaskState, updated, now time.Time) bool {
	w := r.Window(tenant)
	return w > 0 && state.Terminal() && updated.Before(now.Add(-w))
}

// Shortest returns the shortest window of r that is not forever, or 0 when
// every window is forever: no task updated after now minus it can be
// expired.
func (r Retention) Shortest() time.Duration {
	shortest := r.Finished
	for _, w := range r.Tenants {
		if w > 0 && (shortest == 0 || w < shortest) {
			shortest = w
		}
	}
	return shortest
}

// Expiring is a finished task a [Purger] found past its window.
type Expiring struct {
	// ID is the task's id.
	ID a2a.TaskID `json:"id"`
	// Owner is the task's owner.
	Owner Owner `json:"owner"`
	// State is the task's final state.
	State a2a.TaskState `json:"state"`
	// Updated is when its status last changed.
	Updated time.Time `json:"updated"`
}

// PurgeResult is what one [Purger.Purge] deleted.
type PurgeResult struct {
	// Tasks are the tasks deleted, with everything they held in the store.
	Tasks []Expiring
	// Blobs are the digests of the blobs that deleted tasks named and that
	// no task left in the store names (see [BlobIndex]): the caller may
	// delete them.
	Blobs []string
}

// StoreStats describes what a store holds.
type StoreStats struct {
	// Tasks counts the tasks stored.
	Tasks int `json:"tasks"`
	// ByState counts them by state.
	ByState map[a2a.TaskState]int `json:"by_state"`
	// Bytes is the room the store takes: the file and its log on disk for
	// the embedded store, the memory of its keys for Redis.
	Bytes int64 `json:"bytes"`
	// Oldest is the task whose status changed longest ago; empty without
	// tasks.
	Oldest a2a.TaskID `json:"oldest,omitempty"`
	// OldestUpdated is when its status last changed.
	OldestUpdated time.Time `json:"oldest_updated,omitzero"`
	// LastPurge is when a purge last deleted tasks; zero if none ever did.
	LastPurge time.Time `json:"last_purge,omitzero"`
	// LastPurgeCount counts the tasks that purge deleted.
	LastPurgeCount int `json:"last_purge_count"`
	// Purged counts every task purges deleted since the store was made.
	Purged int64 `json:"purged"`
}

// A BlobIndex tells a store which blobs (raw artifact parts kept outside the
// store, by digest) a task names, so that [Purger.Purge] can report those no
// kept task names any more.
type BlobIndex struct {
	// Marker is a string that the stored JSON of every task naming a blob
	// holds (a metadata key): the store reads the blobs of no other task.
	Marker string
	// Digests returns the digests of the blobs t names.
	Digests func(t *a2a.Task) []string
}

// Names returns the digests of the blobs the task whose stored JSON is rec
// names, or nil; decode is called only when rec holds the marker.
func (x *BlobIndex) Names(rec []byte, decode func() (*a2a.Task, error)) []string {
	if x == nil || x.Digests == nil || x.Marker == "" || !bytes.Contains(rec, []byte(x.Marker)) {
		return nil
	}
	t, err := decode()
	if err != nil || t == nil {
		return nil
	}
	return x.Digests(t)
}

// Purger is a [Store] that deletes finished tasks past their retention
// window. Both stores implement it.
type Purger interface {
	// Expired returns up to limit finished tasks past the window r gives
	// their tenant at now, oldest status change first.
	Expired(ctx context.Context, r Retention, now time.Time, limit int) ([]Expiring, error)
	// Purge deletes those of ids that are still finished and past their
	// window under r at now, each at once with everything the store holds
	// of it: its snapshot, events, list index entries, push configs and
	// their delivery state, and its blob references. A task with a write in
	// flight is left for a later purge. After Purge a deleted task reads as
	// [ErrNotFound].
	Purge(ctx context.Context, r Retention, now time.Time, ids []a2a.TaskID) (*PurgeResult, error)
	// Stats describes what the store holds. It reads every task's index
	// entry: it is for operators, not for requests.
	Stats(ctx context.Context) (*StoreStats, error)
}
