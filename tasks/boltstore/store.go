package boltstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

var (
	bucketTasks      = []byte("tasks")      // task id → its head (split.go), or record.Task (JSON) as stores before wrote it
	bucketPieces     = []byte("pieces")     // task id, 0, kind, index → a piece of the task (split.go)
	bucketHeads      = []byte("heads")      // task id → version, updated, owner key (binary)
	bucketEvents     = []byte("events")     // task id, 0, seq of the first → the events of one write (see eventBatchV1)
	bucketByOwner    = []byte("by_owner")   // owner key, inverted updated, task id → state, 0, context id
	bucketUnfinished = []byte("unfinished") // task id → nothing
	bucketPush       = []byte("push")       // task id, 0, config id → pushRecord (JSON)
	bucketMeta       = []byte("meta")       // keyLogApplied → the sequence number of the last log record applied
	bucketFinished   = []byte("finished")   // updated, task id → owner key: finished tasks, oldest first (retention.go)
	bucketBlobRefs   = []byte("blobrefs")   // blob digest, 0, task id → nothing: the blobs tasks name (tasks.BlobIndex)
)

// allBuckets are the buckets a store file has.
var allBuckets = [][]byte{bucketTasks, bucketPieces, bucketHeads, bucketEvents, bucketByOwner, bucketByState, bucketByContext, bucketCounts,
	bucketUnfinished, bucketPush, bucketMeta, bucketFinished, bucketBlobRefs}

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

// Store is a [tasks.Store] in one bbolt file, with a write-ahead log in front
// of it (see wal.go). Writers queue their changes; a single committer takes
// everything queued, checks each append against the task's latest version,
// writes the accepted ones to the log with one fsync (group commit, without
// waiting for a timer: bbolt's own Batch waits up to MaxBatchDelay even when
// alone) and answers them. An applier then applies them to bbolt in order, in
// large transactions, with the few writes that are not appends (push
// configs, purges of finished tasks: retention.go), which it answers once
// bbolt has committed them.
type Store struct {
	db     *bolt.DB
	mu     sync.RWMutex // guards closed and sends on writes
	closed bool
	writes chan *boltWrite
	done   chan struct{} // closed when the applier has stopped
	codec  *recordCodec
	reads  *decodedCache
	sealer *tasks.Sealer // nil: push secrets stored as given
	blobs  *tasks.BlobIndex
	log    *wal // the committer's

	// accepted is the sequence number of the last record in the log,
	// applied that of the last one in bbolt: a read waits until applied
	// has reached the accepted it saw when it started.
	accepted atomic.Uint64
	applied  atomic.Uint64

	amu     sync.Mutex
	changed *sync.Cond // on amu: queue grew, applied moved, broken or a stall set
	queue   []*boltWrite
	backlog int                    // appends in queue
	heads   map[a2a.TaskID]walHead // the latest version of tasks with appends in queue
	others  int                    // writes in queue that are not appends
	purging map[a2a.TaskID]bool    // tasks a queued purge may delete: appends to them are refused
	readers int                    // reads waiting for the applier
	timer   *time.Timer            // armed while appends wait in queue
	late    bool                   // timer fired
	ending  bool                   // the committer has stopped: the applier drains the queue and stops
	broken  error                  // the log or bbolt failed for good: every later call fails with it

	// A write to the disk that failed but left everything as it was (a
	// full disk, typically) stalls the store instead of breaking it: the
	// log's, until an append or Ping's probe gets through; bbolt's, until
	// the applier's next try (every applyRetry) commits. Ping reports a
	// stall, so readiness comes back by itself once the disk has room.
	logErr   error
	applyErr error
	resting  bool // the applier waits for applyRetry before trying again
}

var _ tasks.Store = (*Store)(nil)

// walHead is a task's latest accepted version, which bbolt may not have yet.
type walHead struct {
	version uint64
	owner   []byte
	app     *walAppend // the append that made it; nil for a head read from bbolt
}

// boltWrite is an append (app), another write (fn), or Ping's probe of a
// stalled log (neither), queued for the committer. A purge is a write (fn)
// with the tasks it may delete (purge), which the committer takes out of
// the hands of later appends.
type boltWrite struct {
	app   *walAppend
	fn    func(*bolt.Tx) error
	purge *purgeHold
	res   chan error
}

// applyRetry is how long the applier waits after bbolt failed to commit
// (a full disk) before it tries again.
const applyRetry = 500 * time.Millisecond

// Open opens (or creates) the store file at path, and applies what its
// log holds that the file does not. A file another process holds open is
// refused after timeout. [WithSealer] seals push secrets. A damaged store
// file is refused with an [tasks.ErrCorrupt] error ("tasks.db is damaged: ..."),
// and a damaged log with a [*LogDamageError] naming the segment and the
// offset; the end of a write a crash cut short is dropped, with a warning.
func Open(path string, timeout time.Duration, opts ...Option) (*Store, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := checkBoltFile(path); err != nil {
		return nil, fmt.Errorf("open task store %s: %w", path, err)
	}
	var (
		db   *bolt.DB
		next uint64
	)
	err := guardFaults(path, func() error {
		var err error
		db, next, err = openBoltFile(path, timeout, cfg.blobs)
		return err
	})
	if err != nil {
		if db != nil {
			db.Close()
		}
		return nil, fmt.Errorf("open task store %s: %w", path, err)
	}
	s := &Store{db: db, writes: make(chan *boltWrite, maxBatch), done: make(chan struct{}),
		codec: newRecordCodec(), reads: newDecodedCache(), sealer: cfg.sealer, blobs: cfg.blobs,
		log: &wal{base: path, next: next}, heads: map[a2a.TaskID]walHead{}, purging: map[a2a.TaskID]bool{}}
	s.changed = sync.NewCond(&s.amu)
	s.accepted.Store(next - 1)
	s.applied.Store(next - 1)
	go s.commitLoop()
	go s.applyLoop()
	return s, nil
}

// openBoltFile opens the bbolt file and replays the log into it. On an
// error db may be open; the caller closes it.
func openBoltFile(path string, timeout time.Duration, blobs *tasks.BlobIndex) (db *bolt.DB, next uint64, err error) {
	// The free page list is not written with every commit but rebuilt by a
	// scan when the file is opened: written, it grows with the file and was
	// most of each commit's pages (a blocking send at 16 senders took about
	// 3x as long). Data and meta pages are fsynced as before. The map
	// freelist allocates in constant time instead of scanning an array.
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, 0, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		// A store made before retention has no finished index: it is
		// built from the tasks' heads, once.
		indexed := tx.Bucket(bucketFinished) != nil
		// Nor one before list indexes, which are built from by_owner.
		listed := tx.Bucket(bucketByState) != nil
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if !listed {
			if err := indexLists(tx); err != nil {
				return err
			}
		}
		if indexed {
			return nil
		}
		return indexFinished(tx)
	})
	if errors.Is(err, bolt.ErrIncompatibleValue) {
		return db, 0, fmt.Errorf("%s is damaged: one of its buckets is not a bucket: %w", filepath.Base(path), tasks.ErrCorrupt)
	}
	if err != nil {
		return db, 0, fmt.Errorf("init: %w", err)
	}
	next, err = replayWAL(db, path, blobs)
	return db, next, err
}

// guardFaults runs fn, which reads the store file through bbolt's memory
// map, and turns a fault or a panic in it (bbolt's answer to a page that is
// not what it should be) into an error naming the file. Faults and panics
// in bbolt's own goroutines cannot be caught: checkBoltFile refuses first
// what would cause them that it can see. A panic inside bolt.Open leaves
// its file open and locked; the process is about to stop then.
func guardFaults(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s is damaged: %v: %w", filepath.Base(path), r, tasks.ErrCorrupt)
		}
	}()
	return fn()
}

// The layout of a bbolt meta page (go.etcd.io/bbolt/internal/common, a
// package other modules cannot import): a 16-byte page header, then magic,
// version, page size, flags (uint32s), root bucket page and sequence,
// freelist page, high-water page, transaction id (uint64s), and an FNV-64a
// checksum of the fields before it, in the machine's byte order (little
// endian on every platform Handoff builds for).
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltMetaOffset  = 16
	boltMetaSize    = 64 // the fields, 56 bytes, and the checksum
	boltNoFreelist  = math.MaxUint64
	boltMinPageSize = 1024
)

// boltMeta is what checkBoltFile reads of a meta page.
type boltMeta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

// readBoltMeta reads and checks the meta page at off.
func readBoltMeta(f *os.File, off int64) (boltMeta, bool) {
	b := make([]byte, boltMetaSize)
	if _, err := f.ReadAt(b, off+boltMetaOffset); err != nil {
		return boltMeta{}, false
	}
	le := binary.LittleEndian
	h := fnv.New64a()
	h.Write(b[:56])
	if le.Uint32(b) != boltMagic || le.Uint32(b[4:]) != boltVersion || le.Uint64(b[56:]) != h.Sum64() {
		return boltMeta{}, false
	}
	m := boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	if m.pageSize < boltMinPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, false
	}
	return m, true
}

// checkBoltFile refuses a store file that bbolt would crash on rather than
// refuse: one shorter than its last commit says (bbolt maps the file and
// follows page numbers into the map: a fault, SIGBUS, not an error), whose
// meta pages both fail their checksums or point past its end, or whose
// page tree is not whole (checkBoltPages). It reads the two meta pages as
// bbolt does and takes the valid one of the later transaction.
func checkBoltFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check store file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("check store file: %w", err)
	}
	size := fi.Size()
	if size == 0 {
		return nil // bbolt makes a new store in it
	}
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("%s is damaged: %s: %w", filepath.Base(path), fmt.Sprintf(format, args...), tasks.ErrCorrupt)
	}
	m, ok := readBoltMeta(f, 0)
	// Page 1 is one page in: the page size is meta 0's, or, with meta 0
	// damaged, each bbolt may have used.
	sizes := []int64{int64(m.pageSize)}
	if !ok {
		sizes = sizes[:0]
		for ps := int64(boltMinPageSize); ps <= 64<<10; ps <<= 1 {
			sizes = append(sizes, ps)
		}
	}
	for _, ps := range sizes {
		if m1, ok1 := readBoltMeta(f, ps); ok1 && int64(m1.pageSize) == ps && (!ok || m1.txid > m.txid) {
			m, ok = m1, true
			break
		}
	}
	if !ok {
		return damaged("neither of its two meta pages checks (a file of %d bytes)", size)
	}
	// Divided, not multiplied: a damaged page count must not wrap around.
	if m.pageSize == 0 || m.pgid > uint64(size)/uint64(m.pageSize) {
		return damaged("it is %d bytes, but its last commit (transaction %d) holds %d pages of %d bytes: it was cut short", size, m.txid, m.pgid, m.pageSize)
	}
	if m.root >= m.pgid || m.freelist != boltNoFreelist && m.freelist >= m.pgid {
		return damaged("its meta page (transaction %d) points past its last page", m.txid)
	}
	var pages error
	if err := guardFaults(path, func() error { pages = checkBoltPages(f, m); return nil }); err != nil {
		return err // a fault reading the mapped file
	}
	if pages != nil {
		return damaged("%v", pages)
	}
	return nil
}

// replayWAL applies to db the log's records it does not have, syncs, and
// deletes the log. It returns the sequence number the next record gets.
// Damage planWAL refuses is returned as its *LogDamageError, the log left
// as it is.
func replayWAL(db *bolt.DB, path string, blobs *tasks.BlobIndex) (uint64, error) {
	applied, err := logApplied(db)
	if err != nil {
		return 0, err
	}
	var legacy bool
	if err := db.View(func(tx *bolt.Tx) error { legacy = legacyLog(tx); return nil }); err != nil {
		return 0, err
	}
	scans, err := scanWAL(path, legacy)
	if err != nil {
		return 0, err
	}
	plan, err := planWAL(scans, applied)
	if err != nil {
		return 0, err
	}
	for _, d := range plan.harmless {
		slog.Default().Warn("task store log: damaged bytes that held only records the store had applied; nothing is lost",
			slog.String("file", d.path), slog.Int("offset", d.off), slog.Int("bytes", d.end-d.off))
	}
	if d := plan.torn; d != nil {
		slog.Default().Warn("task store log: dropped the end of a write a crash cut short",
			slog.String("file", d.path), slog.Int("offset", d.off), slog.Int("bytes", d.end-d.off), slog.Uint64("from_record", d.from))
	}
	for _, a := range plan.recs {
		a.refs = blobNames(blobs, a.id, a.rec)
	}
	if err := applyRecords(db, plan.recs, applied, 0); err != nil {
		return 0, err
	}
	if err := removeLog(path, plan.paths); err != nil {
		return 0, err
	}
	if legacy { // no old segment is left: a headerless one is damage from now on
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keyLogFormat, logFormat2)
		}); err != nil {
			return 0, fmt.Errorf("record the log format: %w", err)
		}
	}
	// Numbers go on from the last one used, so bbolt's position never
	// covers a record still to come.
	return plan.next, nil
}

// logApplied reads the sequence number of the last log record db applied.
func logApplied(db *bolt.DB) (uint64, error) {
	var applied uint64
	err := db.View(func(tx *bolt.Tx) error {
		var err error
		applied, err = logAppliedTx(tx)
		return err
	})
	return applied, err
}

func logAppliedTx(tx *bolt.Tx) (uint64, error) {
	b := tx.Bucket(bucketMeta).Get(keyLogApplied)
	switch {
	case len(b) == 8:
		return binary.BigEndian.Uint64(b), nil
	case b != nil:
		return 0, fmt.Errorf("%w: log position of %d bytes", tasks.ErrCorrupt, len(b))
	}
	return 0, nil
}

// applyRecords applies recs after applied to db in transactions that sync,
// each moving bbolt's log position to its last record, or to position when
// that is later (a recovery moves it past records it dropped).
func applyRecords(db *bolt.DB, recs []*walAppend, applied, position uint64) error {
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
			return err
		}
	}
	if position == 0 {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyLogApplied, binary.BigEndian.AppendUint64(nil, position))
	})
}

// removeLog deletes the log's segments, oldest first, and its spare.
func removeLog(path string, paths []string) error {
	for _, p := range append(paths, sparePath(path)) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete replayed log: %w", err)
		}
	}
	return nil
}

// Ping reports whether the store is open and can write; readiness checks
// use it. While writes fail for want of space it reports why, and once the
// log can take writes again and bbolt has caught up it reports nil, without
// the store being reopened.
func (s *Store) Ping(ctx context.Context) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return tasks.ErrClosed
	}
	s.amu.Lock()
	err := cmp.Or(s.broken, s.applyErr)
	logErr := s.logErr
	s.amu.Unlock()
	if err != nil || logErr == nil {
		s.mu.RUnlock()
		return err
	}
	// The log could not take the last write: ask the committer whether it
	// can now.
	probe := &boltWrite{res: make(chan error, 1)}
	select {
	case s.writes <- probe:
	case <-ctx.Done():
		s.mu.RUnlock()
		return logErr
	}
	s.mu.RUnlock()
	select {
	case err := <-probe.res:
		return err
	case <-ctx.Done():
		return logErr
	}
}

// syncFreelist writes bbolt's free page list, once, in a last commit: the
// next open reads it instead of scanning the whole file for free pages
// (most of an open's time at 10^5 tasks and more). Commits do not write it
// (NoFreelistSync, see openBoltFile), and the first commit after the open
// drops it from the meta page, so a crash leaves the scan to the open after.
func syncFreelist(db *bolt.DB) error {
	db.NoFreelistSync = false
	err := db.Update(func(*bolt.Tx) error { return nil }) // bbolt commits the free list and meta page even so
	if err != nil {
		return fmt.Errorf("write the free page list: %w", err)
	}
	return nil
}

// Close waits for queued writes to commit and be applied, deletes the log and
// closes the file, with its free page list (syncFreelist).
func (s *Store) Close() error {
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
	if broken == nil && err == nil {
		err = syncFreelist(s.db)
	}
	return errors.Join(broken, err, s.db.Close())
}

func (s *Store) update(ctx context.Context, w *boltWrite) error {
	w.res = make(chan error, 1)
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return tasks.ErrClosed
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

// noSpace reports whether err is a write that found the disk or the
// quota full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// fullError is a write refused for want of space with nothing of it
// stored: [tasks.ErrStoreFull], with the cause's message.
type fullError struct{ error }

func (fullError) Is(target error) bool { return target == tasks.ErrStoreFull }
func (e fullError) Unwrap() error      { return e.error }

// markFull marks err as [tasks.ErrStoreFull] when it is a write that found
// no space; the callers pass only errors of writes that stored nothing.
func markFull(err error) error {
	if noSpace(err) {
		return fullError{err}
	}
	return err
}

// keyLogFormat records that the log beside the store file is written with
// segment headers (format 2): from then on a segment without a valid header
// is damage, not an old segment. It is written, synced, after the first
// replay by this format and before its first segment.
var keyLogFormat = []byte("log_format")

// logFormat2 is keyLogFormat's value.
var logFormat2 = []byte("2")

// legacyLog reports whether the log beside db may still hold old-format
// segments: db never recorded keyLogFormat.
func legacyLog(tx *bolt.Tx) bool {
	b := tx.Bucket(bucketMeta)
	return b == nil || b.Get(keyLogFormat) == nil
}

// commitLoop is the committer: it takes everything queued and commits it.
func (s *Store) commitLoop() {
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
func (s *Store) commit(batch []*boltWrite, recs []*walAppend) []*walAppend {
	s.amu.Lock()
	for s.backlog > maxBacklog && s.broken == nil && s.applyErr == nil {
		s.changed.Wait()
	}
	broken := s.broken
	if broken == nil && s.backlog > maxBacklog {
		broken = s.applyErr // stalled with a full backlog: fail now rather than wait for room
	}
	s.amu.Unlock()
	if broken != nil {
		for _, w := range batch {
			w.res <- broken
		}
		return recs
	}
	batch, probes := splitProbes(batch)
	// The versions this batch moves tasks to, for the next append to the
	// same task in it; they join s.heads once logged.
	moved := map[a2a.TaskID]walHead{}
	stored := s.storedHeads(batch)
	queued := batch[:0]
	for _, w := range batch {
		if w.purge != nil {
			s.holdForPurge(w.purge, moved)
		}
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
	err := s.log.append(recs)
	if err == nil && len(recs) == 0 && len(probes) > 0 {
		err = s.log.ready()
	}
	s.amu.Lock()
	switch {
	case err == nil:
		if len(recs) > 0 || len(probes) > 0 {
			s.logErr = nil
		}
	case isUnchanged(err) || len(recs) == 0:
		// None of recs is in the log: their writers are told, and the
		// next write (or probe) tries again.
		s.logErr = fmt.Errorf("task store log: %w", markFull(err))
	default:
		// What the log holds now is unknown (a failed fsync may have kept
		// some of it or none, and could not be undone): nothing more is
		// accepted until the store is opened again, which applies
		// whatever the log kept.
		s.broken = fmt.Errorf("task store log: %w", err)
		s.changed.Broadcast()
	}
	if err != nil {
		err = cmp.Or(s.broken, s.logErr)
		s.amu.Unlock()
		for _, w := range queued {
			w.res <- err
		}
		for _, w := range probes {
			w.res <- err
		}
		return recs
	}
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
	for _, w := range probes {
		w.res <- nil
	}
	return recs
}

// splitProbes takes Ping's probes out of batch.
func splitProbes(batch []*boltWrite) (writes, probes []*boltWrite) {
	writes = batch[:0]
	for _, w := range batch {
		if w.app == nil && w.fn == nil {
			probes = append(probes, w)
		} else {
			writes = append(writes, w)
		}
	}
	return writes, probes
}

// storedHeads reads, in one read transaction, what bbolt holds of the
// batch's tasks that have no append waiting for the applier (nil: not
// there): a transaction for each was a tenth of a send's allocations. It
// returns nil when the read fails; check then reads each task itself, and
// reports the error to its writer.
func (s *Store) storedHeads(batch []*boltWrite) map[a2a.TaskID]*walHead {
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
func (s *Store) check(a *walAppend, moved map[a2a.TaskID]walHead, stored map[a2a.TaskID]*walHead) error {
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
		return tasks.ErrNotFound
	}
	s.amu.Lock()
	purging := s.purging[a.id]
	s.amu.Unlock()
	if purging { // finished, so no append fits it anyway
		return tasks.ErrNotFound
	}
	// What bbolt would refuse is refused here, before it is logged: once
	// logged, an append must apply.
	if k := len(a.owner) + 8 + len(a.id); k > bolt.MaxKeySize || len(a.id)+9 > bolt.MaxKeySize {
		return fmt.Errorf("task id and owner make a key of %d bytes, over the store's limit of %d", k, bolt.MaxKeySize)
	}
	if v := max(len(a.rec), len(a.encoded)); v > bolt.MaxValueSize {
		return fmt.Errorf("task record of %d bytes, over the store's limit of %d", v, bolt.MaxValueSize)
	}
	// Nor may the log take a record it could not read back after a crash.
	if v := len(a.rec) + len(a.encoded) + len(a.index) + len(a.owner) + len(a.id) + 64; v > walMaxRecordSize {
		return fmt.Errorf("task write of %d bytes, over the log's limit of %d", v, walMaxRecordSize)
	}
	if a.version != h.version+a.events {
		return tasks.ErrConflict
	}
	return nil
}

// applyLoop is the applier: it applies the queue to bbolt, in order.
func (s *Store) applyLoop() {
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
func (s *Store) due() bool {
	if len(s.queue) == 0 || s.resting {
		return s.ending
	}
	return s.ending || s.readers > 0 || s.others > 0 || s.backlog >= maxApply || s.late
}

// armLocked starts the applier's timer, under amu, when something is queued.
func (s *Store) armLocked() {
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
// with its error and the others committed without it. An append cannot
// fail here (the committer checked it): one that does breaks the store,
// and from then on nothing more is applied, the log staying whole for the
// next open. A commit that fails (a full disk: bbolt rolls it back) stalls
// the store instead: the other writes are answered with the error, and the
// appends go back to the head of the queue for the applier to try again
// after applyRetry; they are in the log meanwhile.
func (s *Store) apply(batch []*boltWrite) {
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
	refused := false // an append failed: not a commit's failure
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
						refused = true
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
	if err != nil {
		if appends > 0 && s.broken == nil {
			s.stallOrBreak(batch, err, refused)
		}
		s.changed.Broadcast()
		s.amu.Unlock()
		return
	}
	if s.applyErr != nil && appends > 0 {
		slog.Default().Info("task store: bbolt applies the log again")
		s.applyErr = nil
	}
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
	s.changed.Broadcast()
	s.amu.Unlock()
	if last > 0 {
		if err := s.log.release(last); err != nil {
			slog.Default().Warn("delete applied task store log", slog.Any("error", err))
		}
	}
}

// stallOrBreak, under amu, handles a batch with appends bbolt did not
// commit: a full disk stalls the store, the appends queued again for the
// applier's next try; anything else (a refused append, a failure while the
// store closes, an I/O error) breaks it. Only a write that found no space
// is safe to retry: one whose meta page sync failed (EIO) may have left that
// page in the cache, and a retry reusing its transaction id and pages could
// then overwrite what it points to. The next open replays the log, which
// keeps every record.
func (s *Store) stallOrBreak(batch []*boltWrite, err error, refused bool) {
	if refused || s.ending || !noSpace(err) {
		s.broken = fmt.Errorf("task store: %w", err)
		return
	}
	if s.applyErr == nil {
		slog.Default().Warn("task store: bbolt could not apply the log; retrying", slog.Any("error", err))
	}
	s.applyErr = fmt.Errorf("task store: apply to bbolt: %w", markFull(err))
	var again []*boltWrite
	for _, w := range batch {
		if w.app != nil {
			again = append(again, w)
		}
	}
	s.queue = append(again, s.queue...)
	s.resting = true
	time.AfterFunc(applyRetry, func() {
		s.amu.Lock()
		s.resting, s.late = false, true // try again now, whatever else is due
		s.changed.Broadcast()
		s.amu.Unlock()
	})
}

// pushRecord is a push config with its delivery state.
type pushRecord = tasks.PushDelivery

// maxEventValue bounds the values putEvents writes. bbolt rewrites a leaf
// whole, with its values, whenever a key is added to it: a write of 25,000
// events in one value of 7 MiB made every later commit to the task's
// events rewrite megabytes.
const maxEventValue = 32 << 10

// putEvents stores the events value v of a write whose first event is
// first, cut in values of about maxEventValue at most, each under the
// sequence number of its first event.
func putEvents(b *bolt.Bucket, id a2a.TaskID, first uint64, v []byte) error {
	if len(v) <= maxEventValue || v[0] != eventBatchV1 {
		return b.Put(eventKey(id, first), v)
	}
	start, seq, n := 1, first, uint64(0) // the value being cut: v[start:end], events from seq, n of them
	end := 1
	for end < len(v) {
		if len(v)-end < 4 {
			return fmt.Errorf("%w: event batch cut short", tasks.ErrCorrupt)
		}
		size := 4 + int(binary.BigEndian.Uint32(v[end:]))
		if size > len(v)-end {
			return fmt.Errorf("%w: event batch cut short", tasks.ErrCorrupt)
		}
		if n > 0 && end-start+size > maxEventValue {
			if err := b.Put(eventKey(id, seq), append([]byte{eventBatchV1}, v[start:end]...)); err != nil {
				return err
			}
			start, seq, n = end, seq+n, 0
		}
		end += size
		n++
	}
	return b.Put(eventKey(id, seq), append([]byte{eventBatchV1}, v[start:end]...))
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
		return head{}, fmt.Errorf("task head of %d bytes: %w", len(b), tasks.ErrCorrupt)
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

// Append implements [tasks.Store]. The log record, and bbolt, get only
// what the events add to the task (recordCodec.delta) when the codec
// remembers the version they follow; the task whole otherwise.
func (s *Store) Append(ctx context.Context, next *tasks.Snapshot, events []a2a.Event) error {
	if next == nil || next.Task == nil || next.Task.ID == "" {
		return fmt.Errorf("append: snapshot without a task id")
	}
	id := next.Task.ID
	a := &walAppend{id: id, version: next.Version, events: uint64(len(events)), updated: next.Updated.UnixNano(),
		unfinished: tasks.IsUnfinished(next.Task.Status.State), owner: record.OwnerKey(next.Owner),
		index: append(append([]byte(next.Task.Status.State), 0), next.Task.ContextID...),
		// A copy: the writer's snapshot carries Apply's spare capacity,
		// which only its own successor may use.
		snap: &tasks.Snapshot{Task: next.Task, Owner: next.Owner, Version: next.Version, Updated: next.Updated}}
	var err error
	if len(events) > 0 {
		if a.encoded, err = encodeEvents(events); err != nil {
			return fmt.Errorf("append to task %s: encode event: %w", id, err)
		}
	}
	var mem *taskMemory
	if a.rec, mem, err = s.codec.write(next, events); err != nil {
		return fmt.Errorf("append to task %s: encode snapshot: %w", id, err)
	}
	a.refs = s.blobs.Names(a.rec, func() (*a2a.Task, error) {
		rec, err := recordOf(a.rec)
		if err != nil {
			return nil, err
		}
		snap, err := record.Decode(id, rec)
		if err != nil {
			return nil, err
		}
		return snap.Task, nil
	})
	err = s.update(ctx, &boltWrite{app: a})
	if err != nil {
		mem = nil
	}
	s.codec.remember(id, mem, a.unfinished)
	if err != nil {
		return fmt.Errorf("append to task %s: %w", id, err)
	}
	return nil
}

// applyAppend writes a to bbolt: the task's record, head, index entries and
// events. It refuses an append that does not follow the stored version.
func applyAppend(tx *bolt.Tx, a *walAppend) error {
	id := []byte(a.id)
	heads, events := tx.Bucket(bucketHeads), tx.Bucket(bucketEvents)
	// Task ids are time-ordered (newTaskID), so these take new keys at
	// their end: pages split full instead of half full, and bbolt writes
	// and keeps fewer of them.
	heads.FillPercent, events.FillPercent = 0.9, 0.9
	finished := tx.Bucket(bucketFinished) // nil in a store recovered before it had one: Open builds it
	var prev uint64
	var listed, listedSuffix []byte // the task's list entry before this append
	if hb := heads.Get(id); hb != nil {
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, a.owner) {
			return tasks.ErrNotFound
		}
		prev = h.version
		key := append(bytes.Clone(a.owner), indexSuffix(h.updated, a.id)...)
		if old := tx.Bucket(bucketByOwner).Get(key); old != nil {
			listed, listedSuffix = bytes.Clone(old), key[len(a.owner):]
		}
		if err := tx.Bucket(bucketByOwner).Delete(key); err != nil {
			return err
		}
		if finished != nil {
			if err := finished.Delete(finishedKey(h.updated, a.id)); err != nil {
				return err
			}
		}
	}
	if a.version != prev+a.events {
		return tasks.ErrConflict
	}
	if a.events > 0 {
		if err := putEvents(events, a.id, prev+1, a.encoded); err != nil {
			return err
		}
	}
	if err := writeTask(tx, a.id, a.seq, a.rec); err != nil {
		return err
	}
	updated := time.Unix(0, a.updated)
	if err := heads.Put(id, encodeHead(a.version, updated, a.owner)); err != nil {
		return err
	}
	suffix := indexSuffix(updated, a.id)
	if err := tx.Bucket(bucketByOwner).Put(append(bytes.Clone(a.owner), suffix...), a.index); err != nil {
		return err
	}
	var err error
	if listed != nil {
		err = indexMoved(tx, a.owner, listedSuffix, listed, suffix, a.index)
	} else {
		err = indexListed(tx, a.owner, suffix, a.index, true)
	}
	if err != nil {
		return err
	}
	if err := indexRetained(tx, finished, a, updated); err != nil {
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

// readBolt reads bbolt as it is.
func (s *Store) readBolt(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return tasks.ErrClosed
	}
	return s.db.View(fn)
}

// view reads bbolt once it holds every append acknowledged before the call.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return tasks.ErrClosed
	}
	if want := s.accepted.Load(); s.applied.Load() < want {
		s.amu.Lock()
		s.readers++
		s.changed.Broadcast() // the applier applies now
		for s.applied.Load() < want && s.broken == nil && s.applyErr == nil {
			s.changed.Wait()
		}
		s.readers--
		err := cmp.Or(s.broken, s.applyErr)
		s.amu.Unlock()
		if err != nil {
			return err
		}
	}
	return s.db.View(fn)
}

// Get implements [tasks.Store].
func (s *Store) Get(_ context.Context, owner tasks.Owner, id a2a.TaskID) (*tasks.Snapshot, error) {
	snap, err := s.load(id, wholeTask)
	if err == nil && snap.Owner != owner {
		err = tasks.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return snap, nil
}

// OwnerOf implements [tasks.Store].
func (s *Store) OwnerOf(_ context.Context, id a2a.TaskID) (tasks.Owner, error) {
	snap, err := s.load(id, readShape{})
	if err != nil {
		return tasks.Owner{}, fmt.Errorf("owner of task %s: %w", id, err)
	}
	return snap.Owner, nil
}

// load reads a task's snapshot whoever owns it, with what shape asks for.
func (s *Store) load(id a2a.TaskID, shape readShape) (*tasks.Snapshot, error) {
	// A task with appends bbolt has not applied yet reads from its latest
	// append, without waiting for the applier; any other has its latest
	// version in bbolt.
	s.amu.Lock()
	h, pending := s.heads[id]
	broken := s.broken
	s.amu.Unlock()
	if broken != nil {
		return nil, broken
	}
	if pending {
		return shaped(h.app.snap, shape), nil
	}
	var snap *tasks.Snapshot
	err := s.readBolt(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTasks).Get([]byte(id))
		if v == nil {
			return tasks.ErrNotFound
		}
		var err error
		if shape != wholeTask {
			snap, err = readTask(tx, id, v, shape)
			return err
		}
		snap, err = s.reads.decode(id, v, func() (*tasks.Snapshot, int, error) {
			rec, chunks, err := storedRecordChunks(tx, id, v, wholeTask)
			if err != nil {
				return nil, 0, err
			}
			snap, err := record.Decode(id, rec)
			if err == nil && chunks != nil && v[0] == splitV1 { // a task stored whole is written whole next
				s.codec.recall(snap, chunks)
			}
			return snap, len(rec), err
		})
		return err
	})
	return snap, err
}

// readTask decodes task id, whose bucketTasks value is v, with what shape
// asks for.
func readTask(tx *bolt.Tx, id a2a.TaskID, v []byte, shape readShape) (*tasks.Snapshot, error) {
	rec, err := storedRecord(tx, id, v, shape)
	if err != nil {
		return nil, err
	}
	snap, err := record.Decode(id, rec)
	if err != nil {
		return nil, err
	}
	return shaped(snap, shape), nil // a task stored whole is read whole
}

// shaped returns snap with no more than shape asks for; snap when that is
// all of it.
func shaped(snap *tasks.Snapshot, shape readShape) *tasks.Snapshot {
	t := snap.Task
	cut := shape.hist >= 0 && len(t.History) > shape.hist
	if !cut && (!shape.noArts || len(t.Artifacts) == 0) {
		return snap
	}
	c := *t
	if cut {
		c.History = t.History[len(t.History)-shape.hist:]
	}
	if shape.noArts {
		c.Artifacts = nil
	}
	return &tasks.Snapshot{Task: &c, Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated}
}

// GetRecent implements [tasks.HistoryReader]: it reads only the newest
// historyLength entries of the task's history.
func (s *Store) GetRecent(_ context.Context, owner tasks.Owner, id a2a.TaskID, historyLength int) (*tasks.Snapshot, error) {
	snap, err := s.load(id, readShape{hist: max(historyLength, 0)})
	if err == nil && snap.Owner != owner {
		err = tasks.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return snap, nil
}

// Events implements [tasks.Store].
func (s *Store) Events(_ context.Context, owner tasks.Owner, id a2a.TaskID, after uint64) ([]tasks.Event, error) {
	var out []tasks.Event
	err := s.view(func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketHeads).Get([]byte(id))
		if hb == nil {
			return tasks.ErrNotFound
		}
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, record.OwnerKey(owner)) {
			return tasks.ErrNotFound
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

// List implements [tasks.Store]. A page by state or by context walks that
// index (listindex.go) from the page's start, and its total is a stored
// count; with UpdatedAfter, or both a state and a context, the total is
// counted over the matches, newest first, stopping at the first too old.
func (s *Store) List(_ context.Context, q tasks.ListQuery) (*tasks.ListPage, error) {
	owner := record.OwnerKey(q.Owner)
	bucket, prefix, counted := bucketByOwner, owner, countKey(owner, countOwner, nil)
	state := []byte(q.State)
	filterState := false // by context, the entry's value is its state
	switch {
	case q.ContextID != "":
		bucket, prefix = bucketByContext, contextPrefix(owner, []byte(q.ContextID))
		counted = countKey(owner, countContext, []byte(q.ContextID))
		if q.State != "" {
			filterState, counted = true, nil
		}
	case q.State != "":
		bucket, prefix, counted = bucketByState, statePrefix(owner, state), countKey(owner, countState, state)
	}
	if q.UpdatedAfter != nil {
		counted = nil
	}
	start := prefix
	if q.PageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(tok) < 9 {
			return nil, tasks.ErrInvalidPageToken
		}
		start = append(append(bytes.Clone(prefix), tok...), 0) // just after the last one returned
	}
	pageSize := q.PageSize
	if pageSize <= 0 {
		pageSize = 50
	}
	shape := readShape{hist: -1, noArts: q.SkipArtifacts}
	if q.HistoryLength != nil {
		shape.hist = max(*q.HistoryLength, 0)
	}
	page := &tasks.ListPage{}
	err := s.view(func(tx *bolt.Tx) error {
		seek := prefix
		if counted != nil {
			var err error
			if page.TotalSize, err = readCount(tx.Bucket(bucketCounts), counted); err != nil {
				return err
			}
			seek = start // nothing before the page to count
		}
		taskb := tx.Bucket(bucketTasks)
		c := tx.Bucket(bucket).Cursor()
		var last []byte
		full := false
		for k, v := c.Seek(seek); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			suffix := k[len(prefix):]
			if len(suffix) < 9 {
				continue
			}
			if filterState && !bytes.Equal(v, state) {
				continue
			}
			if q.UpdatedAfter != nil {
				updated := int64(math.MaxUint64 - binary.BigEndian.Uint64(suffix))
				if updated <= q.UpdatedAfter.UnixNano() {
					break // newest first: the rest are older still
				}
			}
			if counted == nil {
				page.TotalSize++
			}
			if bytes.Compare(k, start) < 0 {
				continue
			}
			if len(page.Tasks) == pageSize {
				page.NextPageToken = base64.RawURLEncoding.EncodeToString(last)
				if counted != nil {
					break
				}
				full = true
			}
			if full {
				continue // keep counting TotalSize
			}
			id := a2a.TaskID(suffix[8:])
			snap, err := readTask(tx, id, taskb.Get([]byte(id)), shape)
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

// Unfinished implements [tasks.Store].
func (s *Store) Unfinished(_ context.Context) ([]*tasks.Snapshot, error) {
	var out []*tasks.Snapshot
	err := s.view(func(tx *bolt.Tx) error {
		taskb := tx.Bucket(bucketTasks)
		return tx.Bucket(bucketUnfinished).ForEach(func(k, _ []byte) error {
			b := taskb.Get(k)
			if b == nil {
				return nil
			}
			snap, err := readTask(tx, a2a.TaskID(k), b, wholeTask)
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
func ownerMatches(tx *bolt.Tx, owner tasks.Owner, task a2a.TaskID) (bool, error) {
	hb := tx.Bucket(bucketHeads).Get([]byte(task))
	if hb == nil {
		return false, nil
	}
	h, err := decodeHead(hb)
	if err != nil {
		return false, err
	}
	return bytes.Equal(h.owner, record.OwnerKey(owner)), nil
}

// PutPushConfig implements [tasks.Store]. A new config starts delivering with
// the task's next event; replacing one keeps its delivery state.
func (s *Store) PutPushConfig(ctx context.Context, owner tasks.Owner, cfg *a2a.PushConfig) error {
	cfg, err := s.sealer.Seal(cfg)
	if err != nil {
		return fmt.Errorf("put push config: %w", err)
	}
	err = s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketHeads).Get([]byte(cfg.TaskID))
		if hb == nil {
			return tasks.ErrNotFound
		}
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, record.OwnerKey(owner)) {
			return tasks.ErrNotFound
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

// PushDeliveries implements [tasks.Store].
func (s *Store) PushDeliveries(_ context.Context, task a2a.TaskID) ([]*tasks.PushDelivery, error) {
	var out []*tasks.PushDelivery
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
			if r.Config, err = s.sealer.Open(r.Config); err != nil {
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

// UpdatePushDelivery implements [tasks.Store].
func (s *Store) UpdatePushDelivery(ctx context.Context, d *tasks.PushDelivery) error {
	err := s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		key := pushKey(d.Config.TaskID, d.Config.ID)
		old := tx.Bucket(bucketPush).Get(key)
		if old == nil {
			return tasks.ErrNotFound
		}
		prev, err := decodePush(old)
		if err != nil {
			return err
		}
		next := *d
		next.Owner, next.Config = prev.Owner, prev.Config // a concurrent replace of the config wins
		next.Retries = prev.Retries                       // requests change only through AddPushRetry and RemovePushRetry
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
		return nil, fmt.Errorf("%w: push config", tasks.ErrCorrupt)
	}
	return &r, nil
}

// GetPushConfig implements [tasks.Store].
func (s *Store) GetPushConfig(_ context.Context, owner tasks.Owner, task a2a.TaskID, id string) (*a2a.PushConfig, error) {
	var out *a2a.PushConfig
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPush).Get(pushKey(task, id))
		if b == nil {
			return tasks.ErrNotFound
		}
		r, err := decodePush(b)
		if err != nil {
			return err
		}
		if r.Owner != owner {
			return tasks.ErrNotFound
		}
		out, err = s.sealer.Open(r.Config)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, err)
	}
	return out, nil
}

// ListPushConfigs implements [tasks.Store].
func (s *Store) ListPushConfigs(_ context.Context, owner tasks.Owner, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	out := []*a2a.PushConfig{}
	err := s.view(func(tx *bolt.Tx) error {
		ok, err := ownerMatches(tx, owner, task)
		if err != nil {
			return err
		}
		if !ok {
			return tasks.ErrNotFound
		}
		prefix := append([]byte(task), 0)
		c := tx.Bucket(bucketPush).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodePush(v)
			if err != nil {
				return err
			}
			if r.Owner == owner {
				cfg, err := s.sealer.Open(r.Config)
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

// DeletePushConfig implements [tasks.Store].
func (s *Store) DeletePushConfig(ctx context.Context, owner tasks.Owner, task a2a.TaskID, id string) error {
	err := s.update(ctx, &boltWrite{fn: func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPush).Get(pushKey(task, id))
		if b == nil {
			return tasks.ErrNotFound
		}
		r, err := decodePush(b)
		if err != nil {
			return err
		}
		if r.Owner != owner {
			return tasks.ErrNotFound
		}
		return tx.Bucket(bucketPush).Delete(pushKey(task, id))
	}})
	if err != nil {
		return fmt.Errorf("delete push config %s of task %s: %w", id, task, err)
	}
	return nil
}
