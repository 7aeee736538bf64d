package mcp

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// AuditRecord is what the pipeline keeps of one [Pipeline.Run]. It never holds the arguments
// or the result, only their digests, so a redacted value cannot reach it by construction. Its
// JSON form (snake_case keys, Duration in nanoseconds) is what [BoltAudit] stores.
type AuditRecord struct {
	// ID is set by [AuditLog.Append].
	ID string `json:"id"`
	// Time is when the Run began.
	Time time.Time `json:"time"`
	// TaskID is the task that proposed the call.
	TaskID string `json:"task_id"`
	// Principal is the caller whose request proposed it.
	Principal string `json:"principal"`
	// Tool is the tool's catalog name, as planned.
	Tool string `json:"tool"`
	// SnapshotVersion is the catalog snapshot the call was planned against.
	SnapshotVersion string `json:"snapshot_version"`
	// ArgsDigest is [ApprovalRequest.Digest]: hex SHA-256 of the canonical {tool, arguments}.
	ArgsDigest string `json:"args_digest,omitempty"`
	// IdempotencyKey is the key the call carried, if it ran with one.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Decision is the policy's answer, empty if the call ended before it.
	Decision Decision `json:"decision,omitempty"`
	// Rule and Layer name the policy rule that decided (see [policy.Decision]).
	Rule string `json:"rule,omitempty"`
	// Layer is the deciding rule's layer.
	Layer policy.Layer `json:"layer,omitempty"`
	// PolicyVersion is the version of the policy that decided: a hash of its rules and the
	// contracts. A call in flight across a reload keeps the version it started with.
	PolicyVersion string `json:"policy_version,omitempty"`
	// Resources are the canonical resources the policy decided on.
	Resources []policy.Resource `json:"resources,omitempty"`
	// Hook is the pre_tool_call hook that denied the call or asked for an approval, if one did.
	Hook string `json:"hook,omitempty"`
	// Grant is the id of the grant this call's approval made, if it made one.
	Grant string `json:"grant,omitempty"`
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
	// TaskID and Principal, when set, select the records of that task and of that caller.
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

// maxAuditBatch bounds how many records share one transaction and one fsync.
const maxAuditBatch = 256

// BoltAudit is an [AuditLog] in its own bbolt file. Appends are group-committed: a single
// committer writes every record queued while the previous transaction was being fsynced in
// one transaction, so concurrent tool calls share an fsync, and a lone call does not wait
// for a timer (as bbolt's own Batch would). Append returns only once its record is durable.
type BoltAudit struct {
	db      *bolt.DB
	mu      sync.RWMutex // guards closed and sends on appends
	closed  bool
	appends chan *auditAppend
	done    chan struct{}
}

// auditAppend is one queued record: its JSON (without the ID, which the committer assigns)
// and where the committer answers.
type auditAppend struct {
	raw []byte
	id  uint64
	res chan error
}

var auditBucket = []byte("audit")

// OpenBoltAudit opens or creates the audit file at path. bbolt locks the file, so a second
// process opening it fails after a second instead of waiting forever. The freelist is not
// written on every commit (bbolt rebuilds it when the file is opened): an append-only log
// frees almost nothing, and each commit writes one page less.
func OpenBoltAudit(path string) (*BoltAudit, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
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
	a := &BoltAudit{db: db, appends: make(chan *auditAppend, maxAuditBatch), done: make(chan struct{})}
	go a.commitLoop()
	return a, nil
}

// Close waits for queued records to be committed, then closes the file.
func (a *BoltAudit) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.appends)
	a.mu.Unlock()
	<-a.done
	return a.db.Close()
}

// Append stores rec under the next sequence number, which becomes its ID: IDs grow with
// every append, so "newest first" does not depend on the clock. ctx bounds only the wait
// for a place in the queue: once queued, the record is committed or fails as a whole, and
// Append waits for that, so that a nil error always means durable.
func (a *BoltAudit) Append(ctx context.Context, rec *AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := encodeAuditRecord(rec)
	if err != nil {
		return err
	}
	w := &auditAppend{raw: raw, res: make(chan error, 1)}
	a.mu.RLock()
	if a.closed {
		a.mu.RUnlock()
		return ErrAuditClosed
	}
	select {
	case a.appends <- w:
	case <-ctx.Done():
		a.mu.RUnlock()
		return ctx.Err()
	}
	a.mu.RUnlock()
	if err := <-w.res; err != nil {
		return fmt.Errorf("append audit record: %w", err)
	}
	rec.ID = strconv.FormatUint(w.id, 10)
	return nil
}

func (a *BoltAudit) commitLoop() {
	defer close(a.done)
	batch := make([]*auditAppend, 0, maxAuditBatch)
	for w := range a.appends {
		batch = append(batch[:0], w)
	fill:
		for len(batch) < maxAuditBatch {
			select {
			case w, ok := <-a.appends:
				if !ok {
					break fill
				}
				batch = append(batch, w)
			default:
				break fill
			}
		}
		err := a.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(auditBucket)
			for _, w := range batch {
				seq, err := b.NextSequence()
				if err != nil {
					return err
				}
				if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), w.raw); err != nil {
					return err
				}
				w.id = seq
			}
			return nil
		})
		for _, w := range batch { // the transaction stands or falls as a whole
			w.res <- err
		}
	}
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
			r, err := decodeAuditRecord(k, v)
			if err != nil {
				return err
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

// encodeAuditRecord stamps rec with the time if it has none and encodes it
// for either audit log, without its ID: the key (bbolt) or the entry ID
// (Redis) holds that; see decodeAuditRecord.
func encodeAuditRecord(rec *AuditRecord) ([]byte, error) {
	if rec.Time.IsZero() {
		rec.Time = time.Now().UTC()
	}
	stored := *rec
	stored.ID = ""
	raw, err := json.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("encode audit record: %w", err)
	}
	return raw, nil
}

// decodeAuditRecord reads one stored record. The key, a big-endian sequence number, is the
// record's ID (older files also hold it in the JSON; the key wins). A record that does not
// decode, or names an outcome or decision this package never writes, is refused: the file
// was damaged or written by something else.
func decodeAuditRecord(key, value []byte) (AuditRecord, error) {
	if len(key) != 8 || binary.BigEndian.Uint64(key) == 0 {
		return AuditRecord{}, fmt.Errorf("audit record key %x: not a sequence number", key)
	}
	seq := binary.BigEndian.Uint64(key)
	var r AuditRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return AuditRecord{}, fmt.Errorf("audit record %d: %w", seq, err)
	}
	if !knownOutcome(r.Outcome) {
		return AuditRecord{}, fmt.Errorf("audit record %d: unknown outcome %q", seq, r.Outcome)
	}
	switch r.Decision {
	case "", DecisionAllow, DecisionDeny, DecisionAsk:
	default:
		return AuditRecord{}, fmt.Errorf("audit record %d: unknown decision %q", seq, r.Decision)
	}
	r.ID = strconv.FormatUint(seq, 10)
	return r, nil
}

// knownOutcome reports whether o is one of the outcomes a call can end with.
func knownOutcome(o Outcome) bool {
	switch o {
	case OutcomeSuccess, OutcomeValidationFailed, OutcomePermissionDenied, OutcomeApprovalRequired,
		OutcomeTimeout, OutcomeCancelled, OutcomePartial, OutcomeUnknownOutcome, OutcomeUnavailableTool,
		OutcomeToolError, OutcomeProtocolError:
		return true
	}
	return false
}
