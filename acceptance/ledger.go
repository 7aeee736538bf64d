package acceptance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// An Entry records one committed delegation: what was accepted, under which contract, and on
// what evidence.
type Entry struct {
	// DelegationID is the key: one delegation, at most one entry.
	DelegationID string `json:"delegation_id"`
	// Skill is the delegated skill.
	Skill string `json:"skill"`
	// ContractVersion is the version of the contract the evidence was checked against.
	ContractVersion string `json:"contract_version"`
	// EvidenceDigests maps each artifact name to the digest the artifact store holds it under
	// ("sha256:" and the hex SHA-256 of its canonical parts, see [Completion.Digests]), or,
	// without a store, to the SHA-256 (hex) of the RFC 8785 canonical JSON of its data.
	EvidenceDigests map[string]string `json:"evidence_digests"`
	// Verifiers holds the verifier checks, all passed.
	Verifiers []Check `json:"verifiers,omitempty"`
	// CommittedAt is when the gate committed, in UTC.
	CommittedAt time.Time `json:"committed_at"`
	// TaskPurgedAt is when retention deleted the local task that delegated
	// (see [BoltLedger.MarkPurged]); zero while it is kept. The entry itself
	// is never deleted: it is the record of what was committed.
	TaskPurgedAt time.Time `json:"task_purged_at,omitzero"`
}

// A Ledger is the append-only record of commits. Implementations are safe for concurrent use.
type Ledger interface {
	// Commit appends e unless the ledger already holds its delegation; either way it returns
	// the stored entry, so a second Commit of one delegation returns the first, unchanged, and
	// no error. When Commit returns without error the entry is durable.
	Commit(ctx context.Context, e *Entry) (stored *Entry, err error)
	// Get returns the entry of a delegation, or an error wrapping [ErrNotCommitted].
	Get(ctx context.Context, delegationID string) (*Entry, error)
	// List returns up to limit entries, newest first; limit <= 0 means all.
	List(ctx context.Context, limit int) ([]*Entry, error)
}

// Bucket names. Entries are keyed by delegation id for idempotency; the sequence bucket keeps
// commit order, which a map keyed by id cannot.
var (
	entriesBucket = []byte("entries")
	orderBucket   = []byte("order")
)

// A BoltLedger is a [Ledger] in a bbolt file. Every Commit is fsynced before it returns.
type BoltLedger struct {
	db *bolt.DB
}

var _ Ledger = (*BoltLedger)(nil)

// OpenBoltLedger opens or creates the ledger file at path. Only one process may hold it: a
// second opener waits up to a second, then fails.
func OpenBoltLedger(path string) (*BoltLedger, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{entriesBucket, orderBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	return &BoltLedger{db: db}, nil
}

// Close releases the file. Commits already returned are on disk.
func (l *BoltLedger) Close() error { return l.db.Close() }

// Commit implements [Ledger].
func (l *BoltLedger) Commit(ctx context.Context, e *Entry) (*Entry, error) {
	if e == nil || e.DelegationID == "" {
		return nil, errors.New("ledger: an entry needs a delegation id")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	js, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	var stored []byte
	err = l.db.Update(func(tx *bolt.Tx) error {
		entries := tx.Bucket(entriesBucket)
		if prev := entries.Get([]byte(e.DelegationID)); prev != nil {
			stored = append([]byte(nil), prev...) // bolt's bytes live only as long as tx
			return nil
		}
		order := tx.Bucket(orderBucket)
		seq, err := order.NextSequence()
		if err != nil {
			return err
		}
		if err := order.Put(binary.BigEndian.AppendUint64(nil, seq), []byte(e.DelegationID)); err != nil {
			return err
		}
		stored = js
		return entries.Put([]byte(e.DelegationID), js)
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return decodeEntry(stored)
}

// Get implements [Ledger].
func (l *BoltLedger) Get(ctx context.Context, delegationID string) (*Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var js []byte
	err := l.db.View(func(tx *bolt.Tx) error {
		js = append([]byte(nil), tx.Bucket(entriesBucket).Get([]byte(delegationID))...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if len(js) == 0 {
		return nil, fmt.Errorf("delegation %q: %w", delegationID, ErrNotCommitted)
	}
	return decodeEntry(js)
}

// List implements [Ledger].
func (l *BoltLedger) List(ctx context.Context, limit int) ([]*Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []*Entry
	err := l.db.View(func(tx *bolt.Tx) error {
		entries := tx.Bucket(entriesBucket)
		cur := tx.Bucket(orderBucket).Cursor()
		for _, id := cur.Last(); id != nil && (limit <= 0 || len(out) < limit); _, id = cur.Prev() {
			e, err := decodeEntry(entries.Get(id))
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return out, nil
}

// decodeEntry returns a fresh Entry, so no caller shares one with the ledger or another caller.
func decodeEntry(js []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(js, &e); err != nil {
		return nil, fmt.Errorf("ledger: corrupt entry: %w", err)
	}
	return &e, nil
}
