package acceptance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"
)

// delegationsBucket keeps one [Delegation] per local task, replaced as it progresses.
var delegationsBucket = []byte("delegations")

// A Delegation is one outbound delegation as `handoff delegations` lists
// it: the local task, the peer's task and where it stands. The local task's
// own event log holds the full record; this is its index in the ledger file.
type Delegation struct {
	// TaskID is the local task that delegated; it is also the delegation id
	// of the ledger entry, if any. A Go executor's delegation, one of
	// several in its task, is TASK#SKILL-N.
	TaskID string `json:"task_id"`
	// Skill is the local skill that delegated.
	Skill string `json:"skill"`
	// Peer is the peer's name in the config.
	Peer string `json:"peer"`
	// RemoteTaskID is the peer's task, once it answered.
	RemoteTaskID string `json:"remote_task_id,omitempty"`
	// RemoteState is the peer task's last known state, empty before it answered.
	RemoteState a2a.TaskState `json:"remote_state,omitempty"`
	// Outcome is the gate's decision, empty until it decided; "failed" too
	// when the delegation ended without one (a timeout, a peer that could
	// not be followed).
	Outcome string `json:"outcome,omitempty"`
	// Reason says why a delegation that did not commit ended as it did: the
	// peer's own words when it failed, else the checks that did not pass,
	// or the error that ended it. Empty for a commit.
	Reason string `json:"reason,omitempty"`
	// Updated is when this record last changed, in UTC.
	Updated time.Time `json:"updated"`
}

// Track stores d, replacing the earlier record of the same task.
func (l *BoltLedger) Track(ctx context.Context, d *Delegation) error {
	if d == nil || d.TaskID == "" {
		return errors.New("track delegation: a task id is required")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	js, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("track delegation %s: %w", d.TaskID, err)
	}
	err = l.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(delegationsBucket)
		if err != nil {
			return err
		}
		return b.Put([]byte(d.TaskID), js)
	})
	if err != nil {
		return fmt.Errorf("track delegation %s: %w", d.TaskID, err)
	}
	return nil
}

// Delegations returns every tracked delegation, most recently updated first.
func (l *BoltLedger) Delegations(ctx context.Context) ([]*Delegation, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*Delegation
	err := l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(delegationsBucket)
		if b == nil { // a ledger written before delegations were tracked
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var d Delegation
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("corrupt delegation %s: %w", k, err)
			}
			out = append(out, &d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list delegations: %w", err)
	}
	slices.SortStableFunc(out, func(a, b *Delegation) int {
		return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(a.TaskID, b.TaskID))
	})
	return out, nil
}
