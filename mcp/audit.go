package mcp

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AuditRecord is what the pipeline keeps of one [Pipeline.Run]. It never holds the arguments
// or the result, only their digests, so a redacted value cannot reach it by construction. Its
// JSON form (snake_case keys, Duration in nanoseconds) is what [BoltAudit] stores.
type AuditRecord struct {
	// ID is set by [AuditLog.Append].
	ID string `json:"id"`
	// Time is when the Run began.
	Time time.Time `json:"time"`
	// TaskID and Principal say which task and which caller proposed the call.
	TaskID    string `json:"task_id"`
	Principal string `json:"principal"`
	// Tool and SnapshotVersion name the tool as planned.
	Tool            string `json:"tool"`
	SnapshotVersion string `json:"snapshot_version"`
	// ArgsDigest is [ApprovalRequest.Digest]: hex SHA-256 of the canonical {tool, arguments}.
	ArgsDigest string `json:"args_digest,omitempty"`
	// Decision is the policy's answer, empty if the call ended before it.
	Decision Decision `json:"decision,omitempty"`
	// Approver is whose approval let the call run, if one did.
	Approver string `json:"approver,omitempty"`
	// Outcome is the call's terminal result.
	Outcome Outcome `json:"outcome"`
	// ResultSHA256 is the hex SHA-256 of the canonical {content, structuredContent} the tool
	// answered with; set for success and tool_error only.
	ResultSHA256 string `json:"result_sha256,omitempty"`
	// Duration is the whole Run, pipeline included.
	Duration time.Duration `json:"duration_ns"`
	// Reason says why the outcome is not success, with redacted values scrubbed and no tool
	// output.
	Reason string `json:"reason,omitempty"`
}

// AuditFilter selects audit records; empty fields match everything.
type AuditFilter struct {
	TaskID, Principal string
	// Limit bounds how many records come back; zero or less means all.
	Limit int
}

// AuditLog stores audit records durably. Implementations are safe for concurrent use.
type AuditLog interface {
	// Append stores rec durably and sets rec.ID (and rec.Time, if zero).
	Append(ctx context.Context, rec *AuditRecord) error
	// List returns the records f selects, newest first.
	List(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
}

var _ AuditLog = (*BoltAudit)(nil)

// BoltAudit is an [AuditLog] in its own bbolt file. Each Append is one fsynced transaction.
type BoltAudit struct {
	db *bolt.DB
}

var auditBucket = []byte("audit")

// OpenBoltAudit opens or creates the audit file at path. bbolt locks the file, so a second
// process opening it fails after a second instead of waiting forever.
func OpenBoltAudit(path string) (*BoltAudit, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(auditBucket)
		return err
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	return &BoltAudit{db: db}, nil
}

// Close closes the file.
func (a *BoltAudit) Close() error { return a.db.Close() }

// Append stores rec under the next sequence number, which becomes its ID: IDs grow with
// every append, so "newest first" does not depend on the clock.
func (a *BoltAudit) Append(ctx context.Context, rec *AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	return a.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(auditBucket)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		stored := *rec
		stored.ID = strconv.FormatUint(seq, 10)
		raw, err := json.Marshal(stored)
		if err != nil {
			return err
		}
		if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), raw); err != nil {
			return err
		}
		rec.ID = stored.ID // only once the write is in the transaction
		return nil
	})
}

// List scans the records newest first. Records are not indexed by task or principal: a scan
// is fine for the volumes one agent's tool calls produce.
func (a *BoltAudit) List(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	var out []AuditRecord
	err := a.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(auditBucket).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if err := ctx.Err(); err != nil {
				return err
			}
			var r AuditRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("audit record %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if (f.TaskID != "" && r.TaskID != f.TaskID) || (f.Principal != "" && r.Principal != f.Principal) {
				continue
			}
			out = append(out, r)
			if f.Limit > 0 && len(out) == f.Limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return out, nil
}
