package tasks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"
)

// ErrInvalidPageToken means a ListQuery's PageToken was not made by this store.
var ErrInvalidPageToken = errors.New("invalid page token")

// ErrClosed is returned by a store's methods after Close.
var ErrClosed = errors.New("store closed")

var (
	bucketTasks      = []byte("tasks")      // task id → taskRecord (JSON)
	bucketHeads      = []byte("heads")      // task id → version, updated, owner key (binary)
	bucketEvents     = []byte("events")     // task id, 0, seq of the first → the events of one write (see eventBatchV1)
	bucketByOwner    = []byte("by_owner")   // owner key, inverted updated, task id → state, 0, context id
	bucketUnfinished = []byte("unfinished") // task id → nothing
	bucketPush       = []byte("push")       // task id, 0, config id → pushRecord (JSON)
	bucketMeta       = []byte("meta")       // keyLogApplied → the sequence number of the last log record applied
)

// maxBatch bounds how many writes share one log write and one fsync, and
// maxApply how many the applier puts in one bbolt transaction.
const (
	maxBatch = 256
	maxApply = 4096 // about 6 MiB of records
)

// maxBacklog bounds the accepted appends bbolt has not applied yet: the
// committer waits beyond it, so a slow disk slows writers instead of growing
// memory.
const maxBacklog = 8192

// BoltStore is a [Store] in one bbolt file, with a write-ahead log in front
// of it (see wal.go). Writers queue their changes; a single committer takes
// everything queued, checks each append against the task's latest version,
// writes the accepted ones to the log with one fsync (group commit, without
// waiting for a timer: bbolt's own Batch waits up to MaxBatchDelay even when
// alone) and answers them. An applier then applies them to bbolt in order, in
// large transactions, with the few writes that are not appends (push
// configs), which it answers once bbolt has committed them.
type BoltStore struct {
	db     *bolt.DB
	mu     sync.RWMutex // guards closed and sends on writes
	closed bool
	writes chan *boltWrite
	done   chan struct{} // closed when the applier has stopped
	codec  *recordCodec
	reads  *decodedCache
	sealer *Sealer // nil: push secrets stored as given
	log    *wal    // the committer's

	// accepted is the sequence number of the last record in the log,
	// applied that of the last one in bbolt: a read waits until applied
	// has reached the accepted it saw when it started.
	accepted atomic.Uint64
	applied  atomic.Uint64

	amu     sync.Mutex
	changed *sync.Cond // on amu: queue grew, applied moved, or broken set
	queue   []*boltWrite
	backlog int                    // appends in queue
	heads   map[a2a.TaskID]walHead // the latest version of tasks with appends in queue
	others  int                    // writes in queue that are not appends
	readers int                    // reads waiting for the applier
	timer   *time.Timer            // armed while appends wait in queue
	late    bool                   // timer fired
	ending  bool                   // the committer has stopped: the applier drains the queue and stops
	broken  error                  // the log or bbolt failed: every later call fails with it
}

var _ Store = (*BoltStore)(nil)

// walHead is a task's latest accepted version, which bbolt may not have yet.
type walHead struct {
	version uint64
	owner   []byte
	app     *walAppend // the append that made it; nil for a head read from bbolt
}

// boltWrite is an append (app) or another write (fn), queued for the committer.
type boltWrite struct {
	app *walAppend
	fn  func(*bolt.Tx) error
	res chan error
}

// OpenBolt opens (or creates) the store file at path, and applies what its
// log holds that the file does not. A file another process holds open is
// refused after timeout. [WithSealer] seals push secrets.
func OpenBolt(path string, timeout time.Duration, opts ...BoltOption) (*BoltStore, error) {
	var cfg boltConfig
	for _, o := range opts {
		o.applyBolt(&cfg)
	}
	// The free page list is not written with every commit but rebuilt by a
	// scan when the file is opened: written, it grows with the file and was
	// most of each commit's pages (a blocking send at 16 senders took about
	// 3x as long). Data and meta pages are fsynced as before. The map
	// freelist allocates in constant time instead of scanning an array.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open task store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketTasks, bucketHeads, bucketEvents, bucketByOwner, bucketUnfinished, bucketPush, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init task store %s: %w", path, err)
	}
	next, err := replayWAL(db, path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open task store %s: %w", path, err)
	}
	s := &BoltStore{db: db, writes: make(chan *boltWrite, maxBatch), done: make(chan struct{}),
		codec: newRecordCodec(), reads: newDecodedCache(), sealer: cfg.sealer,
		log: &wal{base: path, next: next}, heads: map[a2a.TaskID]walHead{}}
	s.changed = sync.NewCond(&s.amu)
	s.accepted.Store(next - 1)
	s.applied.Store(next - 1)
	go s.commitLoop()
	go s.applyLoop()
	return s, nil
}

// replayWAL applies to db the log's records it does not have, syncs, and
// deletes the log. It returns the sequence number the next record gets.
func replayWAL(db *bolt.DB, path string) (uint64, error) {
	recs, paths, next, err := readWAL(path)
	if err != nil {
		return 0, err
	}
	var applied uint64
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta).Get(keyLogApplied); len(b) == 8 {
			applied = binary.BigEndian.Uint64(b)
		} else if b != nil {
			return fmt.Errorf("%w: log position of %d bytes", ErrCorrupt, len(b))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for chunk := range slices.Chunk(recs, maxApply) {
		if chunk[len(chunk)-1].seq <= applied {
			continue // applied before the log was deleted
		}
		err := db.Update(func(tx *bolt.Tx) error {
			for _, a := range chunk {
				if a.seq <= applied {
					continue
				}
				if err := applyAppend(tx, a); err != nil {
					return fmt.Errorf("replay log record %d (task %s): %w", a.seq, a.id, err)
				}
			}
			return tx.Bucket(bucketMeta).Put(keyLogApplied, binary.BigEndian.AppendUint64(nil, chunk[len(chunk)-1].seq))
		})
		if err != nil {
			return 0, err
		}
	}
	for _, p := range append(paths, sparePath(path)) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("delete replayed log: %w", err)
		}
	}
	// Numbers go on from the last one used, so bbolt's position never
	// covers a record still to come.
	return max(next, applied+1), nil
}

// Ping reports whether the store is open; readiness checks use it.
func (s *BoltStore) Ping(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	s.amu.Lock()
	defer s.amu.Unlock()
	return s.broken
}

// Close waits for queued writes to commit and be applied, deletes the log and
// closes the file.
func (s *BoltStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.writes)
	s.mu.Unlock()
	<-s.done
	s.amu.Lock()
	broken := s.broken
	s.amu.Unlock()
	// A broken store keeps its log: it may hold what bbolt lacks, for the
	// next open to apply.
	err := s.log.close(broken == nil)
	return errors.Join(broken, err, s.db.Close())
}

func (s *BoltStore) update(ctx context.Context, w *boltWrite) error {
	w.res = make(chan error, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.writes <- w:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	// Once queued the write commits or fails as a whole; waiting for it (not
	// for ctx) keeps "returned nil" meaning "durable".
	return <-w.res
}

// errRetryBatch rolls back a batch in which one write failed, so the others
// can be committed without it.
var errRetryBatch = errors.New("retry batch")

// keyLogApplied is where bbolt keeps the sequence number of the last log
// record it applied, written in the transaction that applies it: replay
// skips what is at or below it.
var keyLogApplied = []byte("log_applied")

// commitLoop is the committer: it takes everything queued and commits it.
func (s *BoltStore) commitLoop() {
	defer func() {
		s.amu.Lock()
		s.ending = true
		s.changed.Broadcast()
		s.amu.Unlock()
	}()
	batch := make([]*boltWrite, 0, maxBatch)
	recs := make([]*walAppend, 0, maxBatch)
	for w := range s.writes {
		batch = append(batch[:0], w)
	fill:
		for len(batch) < maxBatch {
			select {
			case w, ok := <-s.writes:
				if !ok {
					break fill
				}
				batch = append(batch, w)
			default:
				break fill
			}
		}
		recs = s.commit(batch, recs[:0])
	}
}

// commit checks the appends of batch, logs the accepted ones and answers
// them, and queues them for the applier with the other writes, in order.
func (s *BoltStore) commit(batch []*boltWrite, recs []*walAppend) []*walAppend {
	s.amu.Lock()
	for s.backlog > maxBacklog && s.broken == nil {
		s.changed.Wait()
	}
	broken := s.broken
	s.amu.Unlock()
	if broken != nil {
		for _, w := range batch {
			w.res <- broken
		}
		return recs
	}
	// The versions this batch moves tasks to, for the next append to the
	// same task in it; they join s.heads once logged.
	moved := map[a2a.TaskID]walHead{}
	stored := s.storedHeads(batch)
	queued := batch[:0]
	for _, w := range batch {
		if w.app == nil {
			queued = append(queued, w)
			continue
		}
		if err := s.check(w.app, moved, stored); err != nil {
			w.res <- err
			continue
		}
		moved[w.app.id] = walHead{version: w.app.version, owner: w.app.owner, app: w.app}
		recs = append(recs, w.app)
		queued = append(queued, w)
	}
	if err := s.log.append(recs); err != nil {
		// What the log holds now is unknown (a failed fsync may have kept
		// some of it or none): nothing more is accepted until the store is
		// opened again, which applies whatever the log kept.
		err = fmt.Errorf("task store log: %w", err)
		s.amu.Lock()
		s.broken = err
		s.changed.Broadcast()
		s.amu.Unlock()
		for _, w := range queued {
			w.res <- err
		}
		return recs
	}
	s.amu.Lock()
	for id, h := range moved {
		s.heads[id] = h
	}
	s.queue = append(s.queue, queued...)
	s.backlog += len(recs)
	s.others += len(queued) - len(recs)
	if len(recs) > 0 {
		s.accepted.Store(recs[len(recs)-1].seq)
	}
	s.armLocked()
	s.changed.Broadcast()
	s.amu.Unlock()
	for _, w := range queued {
		if w.app != nil {
			w.res <- nil
		}
	}
	return recs
}

// storedHeads reads, in one read transaction, what bbolt holds of the
// batch's tasks that have no append waiting for the applier (nil: not
// there): a transaction for each was a tenth of a send's allocations. It
// returns nil when the read fails; check then reads each task itself, and
// reports the error to its writer.
func (s *BoltStore) storedHeads(batch []*boltWrite) map[a2a.TaskID]*walHead {
	var ids []a2a.TaskID
	s.amu.Lock()
	for _, w := range batch {
		if w.app != nil {
			if _, ok := s.heads[w.app.id]; !ok {
				ids = append(ids, w.app.id)
			}
		}
	}
	s.amu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	stored := make(map[a2a.TaskID]*walHead, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		for _, id := range ids {
			h, err := storedHead(tx, id)
			if err != nil {
				return err
			}
			stored[id] = h
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return stored
}

// storedHead reads task id's latest version and owner from bbolt; nil when
// bbolt does not hold the task.
func storedHead(tx *bolt.Tx, id a2a.TaskID) (*walHead, error) {
	hb := tx.Bucket(bucketHeads).Get([]byte(id))
	if hb == nil {
		return nil, nil
	}
	dh, err := decodeHead(hb)
	if err != nil {
		return nil, err
	}
	return &walHead{version: dh.version, owner: dh.owner}, nil
}

// check refuses an append that does not follow the task's latest version,
// or that another owner's task of the same id would take.
func (s *BoltStore) check(a *walAppend, moved map[a2a.TaskID]walHead, stored map[a2a.TaskID]*walHead) error {
	h, ok := moved[a.id]
	if !ok {
		s.amu.Lock()
		h, ok = s.heads[a.id]
		s.amu.Unlock()
	}
	if !ok {
		// Not in the applier's queue, so bbolt has its latest version: a
		// head leaves s.heads only once applied (and may have left it
		// since storedHeads looked, which then did not read it).
		sh, read := stored[a.id]
		if !read {
			err := s.db.View(func(tx *bolt.Tx) error {
				var err error
				sh, err = storedHead(tx, a.id)
				return err
			})
			if err != nil {
				return err
			}
		}
		if sh != nil {
			h, ok = *sh, true
		}
	}
	if ok && !bytes.Equal(h.owner, a.owner) {
		return ErrNotFound
	}
	// What bbolt would refuse is refused here, before it is logged: once
	// logged, an append must apply.
	if k := len(a.owner) + 8 + len(a.id); k > bolt.MaxKeySize || len(a.id)+9 > bolt.MaxKeySize {
		return fmt.Errorf("task id and owner make a key of %d bytes, over the store's limit of %d", k, bolt.MaxKeySize)
	}
	if v := max(len(a.rec), len(a.encoded)); v > bolt.MaxValueSize {
		return fmt.Errorf("task record of %d bytes, over the store's limit of %d", v, bolt.MaxValueSize)
	}
	if a.version != h.version+a.events {
		return ErrConflict
	}
	return nil
}

// applyLoop is the applier: it applies the queue to bbolt, in order.
func (s *BoltStore) applyLoop() {
	defer close(s.done)
	var batch []*boltWrite
	for {
		s.amu.Lock()
		for !s.due() {
			s.changed.Wait()
		}
		if len(s.queue) == 0 {
			s.amu.Unlock()
			return
		}
		n := min(len(s.queue), maxApply)
		batch = append(batch[:0], s.queue[:n]...)
		s.queue = s.queue[n:]
		if len(s.queue) == 0 {
			s.queue = nil // let the backing array go
		}
		if s.timer != nil {
			s.timer.Stop() // one that fired already only makes the next apply early
			s.timer = nil
		}
		s.late = false
		s.armLocked()
		s.amu.Unlock()
		s.apply(batch)
		clear(batch)
	}
}

// applyYieldEvery is how many appends the applier puts in bbolt between
// yields of its goroutine. Applying 100 ms of blocking sends takes tens of
// milliseconds of CPU; run in the scheduler's 10 ms slices, it took one of
// the machine's two Ps from the requests at a time, and their p99 at 64
// senders was about a fifth higher (three handoff bench runs each way). Only
// the applier writes bbolt, so nothing waits on the transaction it holds.
const applyYieldEvery = 16

// applyEvery is how often the applier applies appends when nothing asks for
// them sooner: bbolt's commits (two fsyncs each) then rarely compete for the
// disk with the log's, and each carries many appends. Reads of a task's
// snapshot need not wait for it (load).
const applyEvery = 100 * time.Millisecond

// due reports, under amu, whether the applier should apply now: a write that
// is not an append waits in the queue, a read waits for an append, the
// backlog is large, the store is closing, or applyEvery has passed since the
// oldest queued append (its timer broadcasts changed then).
func (s *BoltStore) due() bool {
	if len(s.queue) == 0 {
		return s.ending
	}
	return s.ending || s.readers > 0 || s.others > 0 || s.backlog >= maxApply || s.late
}

// armLocked starts the applier's timer, under amu, when something is queued.
func (s *BoltStore) armLocked() {
	if s.timer == nil && len(s.queue) > 0 {
		s.timer = time.AfterFunc(applyEvery, func() {
			s.amu.Lock()
			s.late = true
			s.changed.Broadcast()
			s.amu.Unlock()
		})
	}
}

// apply commits batch to bbolt in one transaction, with the sequence number
// of its last append. A write that is not an append and fails is answered
// with its error and the others committed without it; an append cannot fail
// here (the committer checked it), so one that does, or a failed commit,
// breaks the store: from then on nothing more is applied, and the log stays
// whole for the next open.
func (s *BoltStore) apply(batch []*boltWrite) {
	s.amu.Lock()
	broken := s.broken
	s.amu.Unlock()
	var last uint64
	appends := 0
	for _, w := range batch {
		if w.app != nil {
			last = w.app.seq
			appends++
		}
	}
	failed := make(map[int]error)
	err := broken
	for err == nil {
		err = s.db.Update(func(tx *bolt.Tx) error {
			for i, w := range batch {
				if failed[i] != nil {
					continue
				}
				if w.app != nil {
					if i%applyYieldEvery == applyYieldEvery-1 {
						runtime.Gosched()
					}
					if err := applyAppend(tx, w.app); err != nil {
						return fmt.Errorf("apply log record %d (task %s): %w", w.app.seq, w.app.id, err)
					}
					continue
				}
				if err := w.fn(tx); err != nil {
					failed[i] = err
					return errRetryBatch
				}
			}
			if last == 0 {
				return nil
			}
			return tx.Bucket(bucketMeta).Put(keyLogApplied, binary.BigEndian.AppendUint64(nil, last))
		})
		if !errors.Is(err, errRetryBatch) {
			break
		}
		err = nil
	}
	for i, w := range batch {
		if w.app != nil {
			continue
		}
		if f := failed[i]; f != nil {
			w.res <- f
		} else {
			w.res <- err
		}
	}
	s.amu.Lock()
	s.others -= len(batch) - appends
	if err != nil && appends > 0 && s.broken == nil {
		s.broken = fmt.Errorf("task store: %w", err)
	}
	if err == nil {
		for _, w := range batch {
			if a := w.app; a != nil {
				if h, ok := s.heads[a.id]; ok && h.app == a { // not a later append of the same version
					delete(s.heads, a.id)
				}
			}
		}
		s.backlog -= appends
		if last > 0 {
			s.applied.Store(last)
		}
	}
	s.changed.Broadcast()
	s.amu.Unlock()
	if err == nil && last > 0 {
		if err := s.log.release(last); err != nil {
			slog.Default().Warn("delete applied task store log", slog.Any("error", err))
		}
	}
}

type taskRecord struct {
	Owner   Owner     `json:"owner"`
	Version uint64    `json:"version"`
	Updated time.Time `json:"updated"`
	Task    *a2a.Task `json:"task"`
}

// pushRecord is a push config with its delivery state.
type pushRecord = PushDelivery

// ownerKey encodes an owner so that no principal or tenant can be a prefix
// of another's key.
func ownerKey(o Owner) []byte {
	b := binary.AppendUvarint(nil, uint64(len(o.Principal)))
	b = append(b, o.Principal...)
	b = binary.AppendUvarint(b, uint64(len(o.Tenant)))
	return append(b, o.Tenant...)
}

func eventKey(id a2a.TaskID, seq uint64) []byte {
	b := make([]byte, 0, len(id)+9)
	b = append(b, id...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

// indexSuffix orders newest first: the inverted timestamp sorts ascending.
func indexSuffix(updated time.Time, id a2a.TaskID) []byte {
	b := binary.BigEndian.AppendUint64(nil, math.MaxUint64-uint64(updated.UnixNano()))
	return append(b, id...)
}

type head struct {
	version uint64
	updated time.Time
	owner   []byte
}

func decodeHead(b []byte) (head, error) {
	if len(b) < 16 {
		return head{}, fmt.Errorf("task head of %d bytes: %w", len(b), ErrCorrupt)
	}
	return head{
		version: binary.BigEndian.Uint64(b),
		updated: time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))),
		owner:   bytes.Clone(b[16:]),
	}, nil
}

func encodeHead(version uint64, updated time.Time, owner []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, version)
	b = binary.BigEndian.AppendUint64(b, uint64(updated.UnixNano()))
	return append(b, owner...)
}

func isUnfinished(s a2a.TaskState) bool {
	return s == a2a.TaskStateSubmitted || s == a2a.TaskStateWorking
}

// Append implements [Store].
func (s *BoltStore) Append(ctx context.Context, next *Snapshot, events []a2a.Event) error {
	if next == nil || next.Task == nil || next.Task.ID == "" {
		return fmt.Errorf("append: snapshot without a task id")
	}
	id := next.Task.ID
	a := &walAppend{id: id, version: next.Version, events: uint64(len(events)), updated: next.Updated.UnixNano(),
		unfinished: isUnfinished(next.Task.Status.State), owner: ownerKey(next.Owner),
		index: append(append([]byte(next.Task.Status.State), 0), next.Task.ContextID...)}
	var known []encodedPart[a2a.Artifact]
	var err error
	if len(events) > 0 {
		if a.encoded, known, err = encodeEvents(events); err != nil {
			return fmt.Errorf("append to task %s: encode event: %w", id, err)
		}
	}
	if a.rec, err = s.codec.encode(next, known); err != nil {
		return fmt.Errorf("append to task %s: encode snapshot: %w", id, err)
	}
	if err := s.update(ctx, &boltWrite{app: a}); err != nil {
		return fmt.Errorf("append to task %s: %w", id, err)
	}
	return nil
}

// applyAppend writes a to bbolt: the task's record, head, index entries and
// events. It refuses an append that does not follow the stored version.
func applyAppend(tx *bolt.Tx, a *walAppend) error {
	id := []byte(a.id)
	heads, tasks, events := tx.Bucket(bucketHeads), tx.Bucket(bucketTasks), tx.Bucket(bucketEvents)
	// Task ids are time-ordered (newTaskID), so these take new keys at
	// their end: pages split full instead of half full, and bbolt writes
	// and keeps fewer of them.
	heads.FillPercent, tasks.FillPercent, events.FillPercent = 0.9, 0.9, 0.9
	var prev uint64
	if hb := heads.Get(id); hb != nil {
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, a.owner) {
			return ErrNotFound
		}
		prev = h.version
		if err := tx.Bucket(bucketByOwner).Delete(append(bytes.Clone(a.owner), indexSuffix(h.updated, a.id)...)); err != nil {
			return err
		}
	}
	if a.version != prev+a.events {
		return ErrConflict
	}
	if a.events > 0 {
		if err := events.Put(eventKey(a.id, prev+1), a.encoded); err != nil {
			return err
		}
	}
	if err := tasks.Put(id, a.rec); err != nil {
		return err
	}
	updated := time.Unix(0, a.updated)
	if err := heads.Put(id, encodeHead(a.version, updated, a.owner)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketByOwner).Put(append(bytes.Clone(a.owner), indexSuffix(updated, a.id)...), a.index); err != nil {
		return err
	}
	if a.unfinished {
		return tx.Bucket(bucketUnfinished).Put(id, nil)
	}
	if prev == 0 {
		return nil // a new task is not in the unfinished bucket yet
	}
	return tx.Bucket(bucketUnfinished).Delete(id)
}

// decodeTaskRecord decodes a stored task and checks it is whole.
func decodeTaskRecord(id a2a.TaskID, b []byte) (*Snapshot, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("decode task %s: %w: %v", id, ErrCorrupt, err)
	}
	if r.Task == nil || r.Task.ID != id {
		return nil, fmt.Errorf("decode task %s: %w: id does not match", id, ErrCorrupt)
	}
	return &Snapshot{Task: r.Task, Owner: r.Owner, Version: r.Version, Updated: r.Updated}, nil
}

// readBolt reads bbolt as it is.
func (s *BoltStore) readBolt(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(fn)
}

// view reads bbolt once it holds every append acknowledged before the call.
func (s *BoltStore) view(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if want := s.accepted.Load(); s.applied.Load() < want {
		s.amu.Lock()
		s.readers++
		s.changed.Broadcast() // the applier applies now
		for s.applied.Load() < want && s.broken == nil {
			s.changed.Wait()
		}
		s.readers--
		err := s.broken
		s.amu.Unlock()
		if err != nil {
			return err
		}
	}
	return s.db.View(fn)
}

// Get implements [Store].
func (s *BoltStore) Get(_ context.Context, owner Owner, id a2a.TaskID) (*Snapshot, error) {
	snap, err := s.load(id)
	if err == nil && snap.Owner != owner {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return snap, nil
}

// OwnerOf implements [Store].
func (s *BoltStore) OwnerOf(_ context.Context, id a2a.TaskID) (Owner, error) {
	snap, err := s.load(id)
	if err != nil {
		return Owner{}, fmt.Errorf("owner of task %s: %w", id, err)
	}
	return snap.Owner, nil
}

// load reads a task's snapshot whoever owns it.
func (s *BoltStore) load(id a2a.TaskID) (*Snapshot, error) {
	// A task with appends bbolt has not applied yet reads from its latest
	// record in the log, without waiting for the applier; any other has its
	// latest version in bbolt.
	s.amu.Lock()
	h, pending := s.heads[id]
	broken := s.broken
	s.amu.Unlock()
	if broken != nil {
		return nil, broken
	}
	if pending {
		return s.reads.decode(id, h.app.rec)
	}
	var snap *Snapshot
	err := s.readBolt(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTasks).Get([]byte(id))
		if b == nil {
			return ErrNotFound
		}
		var err error
		snap, err = s.reads.decode(id, b)
		return err
	})
	return snap, err
}

// Events implements [Store].
func (s *BoltStore) Events(_ context.Context, owner Owner, id a2a.TaskID, after uint64) ([]Event, error) {
	var out []Event
	err := s.view(func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketHeads).Get([]byte(id))
		if hb == nil {
			return ErrNotFound
		}
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, ownerKey(owner)) {
			return ErrNotFound
		}
		prefix := append([]byte(id), 0)
		isEvent := func(k []byte) bool { return len(k) == len(prefix)+8 && bytes.HasPrefix(k, prefix) }
		start := eventKey(id, after+1)
		c := tx.Bucket(bucketEvents).Cursor()
		k, v := c.Seek(start)
		if !bytes.Equal(k, start) {
			// The write holding event after+1 may have started before it.
			if pk, pv := c.Prev(); isEvent(pk) {
				k, v = pk, pv
			} else {
				k, v = c.Seek(start)
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !isEvent(k) {
				continue
			}
			if out, err = decodeEvents(out, binary.BigEndian.Uint64(k[len(prefix):]), after, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", id, err)
	}
	return out, nil
}

// List implements [Store].
func (s *BoltStore) List(_ context.Context, q ListQuery) (*ListPage, error) {
	prefix := ownerKey(q.Owner)
	start := prefix
	if q.PageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(tok) < 9 {
			return nil, ErrInvalidPageToken
		}
		start = append(append(bytes.Clone(prefix), tok...), 0) // just after the last one returned
	}
	pageSize := q.PageSize
	if pageSize <= 0 {
		pageSize = 50
	}
	page := &ListPage{}
	err := s.view(func(tx *bolt.Tx) error {
		tasks := tx.Bucket(bucketTasks)
		c := tx.Bucket(bucketByOwner).Cursor()
		var last []byte
		full := false
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			suffix := k[len(prefix):]
			if len(suffix) < 9 {
				continue
			}
			state, ctxID, _ := bytes.Cut(v, []byte{0})
			if q.State != "" && string(state) != string(q.State) {
				continue
			}
			if q.ContextID != "" && string(ctxID) != q.ContextID {
				continue
			}
			if q.UpdatedAfter != nil {
				updated := int64(math.MaxUint64 - binary.BigEndian.Uint64(suffix))
				if updated <= q.UpdatedAfter.UnixNano() {
					continue
				}
			}
			page.TotalSize++
			if bytes.Compare(k, start) < 0 {
				continue
			}
			if len(page.Tasks) == pageSize {
				page.NextPageToken = base64.RawURLEncoding.EncodeToString(last)
				full = true
			}
			if full {
				continue // keep counting TotalSize
			}
			id := a2a.TaskID(suffix[8:])
			snap, err := decodeTaskRecord(id, tasks.Get([]byte(id)))
			if err != nil {
				return err
			}
			page.Tasks = append(page.Tasks, snap)
			last = bytes.Clone(suffix)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return page, nil
}

// Unfinished implements [Store].
func (s *BoltStore) Unfinished(_ context.Context) ([]*Snapshot, error) {
	var out []*Snapshot
	err := s.view(func(tx *bolt.Tx) error {
		tasks := tx.Bucket(bucketTasks)
		return tx.Bucket(bucketUnfinished).ForEach(func(k, _ []byte) error {
			b := tasks.Get(k)
			if b == nil {
				return nil
			}
			snap, err := decodeTaskRecord(a2a.TaskID(k), b)
			if err != nil {
				return err
			}
			out = append(out, snap)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list unfinished tasks: %w", err)
	}
	return out, nil
}

func pushKey(task a2a.TaskID, id string) []byte {
	return append(append([]byte(task), 0), id...)
}

// ownerMatches reports whether the task exists and belongs to owner.
func ownerMatches(tx *bolt.Tx, owner Owner, task a2a.TaskID) (bool, error) {
	hb := tx.Bucket(bucketHeads).Get([]byte(task))
	if hb == nil {
		return false, nil
	}
	h, err := decodeHead(hb)
	if err != nil {
		return false, err
	}
	return bytes.Equal(h.owner, ownerKey(owner)), nil
}

// PutPushConfig implements [Store]. A new config starts delivering with
// the task's next event; replacing one keeps its delivery state.
func (s *BoltStore) PutPushConfig(ctx context.Context, owner Owner, cfg *a2a.PushConfig) error {
	cfg, err := s.sealer.seal(cfg)
	if err != nil {
		return fmt.Errorf("put push config: %w", err)
	}
	err = s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketHeads).Get([]byte(cfg.TaskID))
		if hb == nil {
			return ErrNotFound
		}
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, ownerKey(owner)) {
			return ErrNotFound
		}
		rec := &pushRecord{Owner: owner, Config: cfg, Delivered: h.version}
		if old := tx.Bucket(bucketPush).Get(pushKey(cfg.TaskID, cfg.ID)); old != nil {
			if prev, err := decodePush(old); err == nil && prev.Owner == owner {
				prev.Config = cfg
				rec = prev
			}
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketPush).Put(pushKey(cfg.TaskID, cfg.ID), b)
	}})
	if err != nil {
		return fmt.Errorf("put push config of task %s: %w", cfg.TaskID, err)
	}
	return nil
}

// PushDeliveries implements [Store].
func (s *BoltStore) PushDeliveries(_ context.Context, task a2a.TaskID) ([]*PushDelivery, error) {
	var out []*PushDelivery
	err := s.view(func(tx *bolt.Tx) error {
		var prefix []byte
		if task != "" {
			prefix = append([]byte(task), 0)
		}
		c := tx.Bucket(bucketPush).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodePush(v)
			if err != nil {
				return err
			}
			if r.Config, err = s.sealer.open(r.Config); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read push deliveries: %w", err)
	}
	return out, nil
}

// UpdatePushDelivery implements [Store].
func (s *BoltStore) UpdatePushDelivery(ctx context.Context, d *PushDelivery) error {
	err := s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		key := pushKey(d.Config.TaskID, d.Config.ID)
		old := tx.Bucket(bucketPush).Get(key)
		if old == nil {
			return ErrNotFound
		}
		prev, err := decodePush(old)
		if err != nil {
			return err
		}
		next := *d
		next.Owner, next.Config = prev.Owner, prev.Config // a concurrent replace of the config wins
		b, err := json.Marshal(&next)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketPush).Put(key, b)
	}})
	if err != nil {
		return fmt.Errorf("update push delivery %s of task %s: %w", d.Config.ID, d.Config.TaskID, err)
	}
	return nil
}

func decodePush(b []byte) (*pushRecord, error) {
	var r pushRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Config == nil {
		return nil, fmt.Errorf("%w: push config", ErrCorrupt)
	}
	return &r, nil
}

// GetPushConfig implements [Store].
func (s *BoltStore) GetPushConfig(_ context.Context, owner Owner, task a2a.TaskID, id string) (*a2a.PushConfig, error) {
	var out *a2a.PushConfig
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPush).Get(pushKey(task, id))
		if b == nil {
			return ErrNotFound
		}
		r, err := decodePush(b)
		if err != nil {
			return err
		}
		if r.Owner != owner {
			return ErrNotFound
		}
		out, err = s.sealer.open(r.Config)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, err)
	}
	return out, nil
}

// ListPushConfigs implements [Store].
func (s *BoltStore) ListPushConfigs(_ context.Context, owner Owner, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	out := []*a2a.PushConfig{}
	err := s.view(func(tx *bolt.Tx) error {
		ok, err := ownerMatches(tx, owner, task)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		prefix := append([]byte(task), 0)
		c := tx.Bucket(bucketPush).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodePush(v)
			if err != nil {
				return err
			}
			if r.Owner == owner {
				cfg, err := s.sealer.open(r.Config)
				if err != nil {
					return err
				}
				out = append(out, cfg)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list push configs of task %s: %w", task, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeletePushConfig implements [Store].
func (s *BoltStore) DeletePushConfig(ctx context.Context, owner Owner, task a2a.TaskID, id string) error {
	err := s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPush).Get(pushKey(task, id))
		if b == nil {
			return ErrNotFound
		}
		r, err := decodePush(b)
		if err != nil {
			return err
		}
		if r.Owner != owner {
			return ErrNotFound
		}
		return tx.Bucket(bucketPush).Delete(pushKey(task, id))
	}})
	if err != nil {
		return fmt.Errorf("delete push config %s of task %s: %w", id, task, err)
	}
	return nil
}
