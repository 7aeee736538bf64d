package boltstore

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/durable"
	"github.com/handoff-a2a/handoff/tasks"
)

// The bbolt store's write-ahead log. bbolt commits by writing the changed
// pages where they live and fsyncing twice (pages, then the meta page): about
// half a millisecond on this project's disks even for one task, and a
// blocking SendMessage paid it on its path. An accepted Append is instead
// durable once its record is in the log — one sequential write and one
// fdatasync for every Append of a group — and is applied to bbolt after, in
// larger transactions, by the store's applier. Reads wait for the applier to
// reach every write acknowledged before they started, so no acknowledged
// write is ever missing from a read.
//
// The log is a series of segment files next to the store, <store>.wal-<first
// sequence number, 16 hex digits>. A segment starts with a header
//
//	"HWAL", 8 random bytes (the segment's salt), CRC-32C of those 12 bytes
//
// then holds a run of records:
//
//	uint32 little-endian length of the payload
//	uint32 little-endian CRC-32C of the salt and the payload
//	uint32 little-endian CRC-32C of the salt and the 8 bytes before it
//	payload: walVersion2, then uvarints seq, group (the seq of the first
//	  record of the same write), version, events count, varint updated
//	  (Unix nanoseconds), byte unfinished (0 or 1), and five
//	  uvarint-length-prefixed byte strings: task id, owner key, index
//	  value, events value, task record.
//
// A record's sequence number is one more than the previous one's, across
// segments; the rest of a segment is zeros (segments are zero-filled and
// synced, header included, before they get their name). bbolt keeps the
// sequence number of the last record it applied, in the transaction that
// applies it. Opening the store replays the records after that number, in
// bbolt transactions that sync, then deletes the segments.
//
// What a crash can leave: only the last write (group) of the last segment
// unfinished, since each write is synced before the next starts and a
// segment is closed only after its last write was synced. After a kill -9
// the write's start is there and the rest zeros; after a power loss any of
// its 512-byte sectors may be missing (zeros, as the segment was filled)
// while later ones are there. So the reader (planWAL) drops damage at the
// end of the last segment only when it looks like that: each damaged record
// shows a sector of zeros or runs past the end of the file, every record
// after it belongs to the same write (its group is not later), and bbolt
// has not applied it (bbolt applies only synced writes). Damage anywhere
// else refuses to open the store with a [LogDamageError] naming the file
// and the offset, unless it held only records bbolt had applied (then it
// is logged: nothing is lost). Past a damaged record the reader walks on by
// the record's length when its header checks, else it searches for the
// next header that checks. The salt keeps a task's own bytes from passing
// for a record there: nobody who writes a task knows it. A gap in the
// sequence numbers (a deleted segment), between bbolt's position and the
// first segment or between segments, refuses too. handoff store recover
// ([Recover]) is the operator's way past a refusal.
//
// Segments written before the header existed (walVersion1 records, an
// 8-byte record header, no group) are still read, with the old rule: any
// damage at the end of the last segment is a torn write.
//
// Written by hand: no Go library offers a log of checksummed records
// shared by many writers with one fsync per group.

const (
	walVersion1          = 1 // records of segments without a header
	walVersion2          = 2
	walHeaderSize        = 12
	walV1HeaderSize      = 8
	walSegmentHeaderSize = 16
	walSector            = 512      // the smallest unit a disk writes whole
	walSegmentMax        = 16 << 20 // a segment's size: one is closed once this full
	walMaxRecordSize     = 1 << 30  // a longer length can only be damage
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// walMagic starts a segment; read as an old record's length it is over
// walMaxRecordSize, so no old segment starts with it.
var walMagic = []byte("HWAL")

// errWALEnd means the bytes ended, or stopped being a record, where a record
// was expected: the end of a segment, or a torn write at its tail.
var errWALEnd = errors.New("end of log")

// errWALChecksum means a record's header checks but its payload does not,
// or runs past the end of the file.
var errWALChecksum = errors.New("record checksum mismatch")

// A LogDamageError is damage in the embedded store's write-ahead log that a
// crash cannot leave: opening the store is refused, since going on without
// the damaged part could lose acknowledged writes. It wraps [tasks.ErrCorrupt].
type LogDamageError struct {
	File   string // the log segment
	Offset int64  // where in it the damage starts
	Reason string
}

func (e *LogDamageError) Error() string {
	return fmt.Sprintf("task store log %s is damaged at offset %d: %s; nothing was changed (handoff store recover --data-dir %s shows what recovering would drop)",
		e.File, e.Offset, e.Reason, filepath.Dir(e.File))
}

// Unwrap returns [tasks.ErrCorrupt].
func (e *LogDamageError) Unwrap() error { return tasks.ErrCorrupt }

// walAppend is one accepted [Store.Append]: everything its bbolt
// transaction writes, ready made.
type walAppend struct {
	seq        uint64
	group      uint64 // the seq of the first record of its write; 0 in an old segment
	id         a2a.TaskID
	version    uint64 // the task's version after the append
	events     uint64 // how many events it appends
	updated    int64  // Unix nanoseconds
	unfinished bool
	owner      []byte // ownerKey
	index      []byte // the by-owner index value: state, 0, context id
	encoded    []byte // the events value; empty when events is 0
	rec        []byte // the task record

	// refs are the blobs rec names (tasks.BlobIndex): not logged, but
	// read from rec again on replay.
	refs []string
	// snap is the snapshot the append stores, which reads of the task use
	// until bbolt has it: not logged (rec may hold only what it adds).
	snap *tasks.Snapshot
}

// newSegmentHeader returns a segment header with a fresh salt, and the CRC
// seed the salt gives the segment's records.
func newSegmentHeader() ([]byte, uint32, error) {
	h := make([]byte, walSegmentHeaderSize)
	copy(h, walMagic)
	if _, err := rand.Read(h[4:12]); err != nil {
		return nil, 0, fmt.Errorf("log segment salt: %w", err)
	}
	binary.LittleEndian.PutUint32(h[12:], crc32.Checksum(h[:12], walCRC))
	return h, crc32.Checksum(h[4:12], walCRC), nil
}

// segmentSeed checks a segment header and returns its records' CRC seed.
func segmentSeed(h []byte) (uint32, bool) {
	if len(h) < walSegmentHeaderSize || !bytes.Equal(h[:4], walMagic) ||
		crc32.Checksum(h[:12], walCRC) != binary.LittleEndian.Uint32(h[12:]) {
		return 0, false
	}
	return crc32.Checksum(h[4:12], walCRC), true
}

// appendWALRecord appends a's record, header included, to b, checksummed
// with seed.
func appendWALRecord(b []byte, a *walAppend, seed uint32) []byte {
	start := len(b)
	b = append(b, make([]byte, walHeaderSize)...)
	b = append(b, walVersion2)
	for _, u := range []uint64{a.seq, a.group, a.version, a.events} {
		b = binary.AppendUvarint(b, u)
	}
	b = binary.AppendVarint(b, a.updated)
	if a.unfinished {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, s := range [][]byte{[]byte(a.id), a.owner, a.index, a.encoded, a.rec} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	payload := b[start+walHeaderSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Update(seed, walCRC, payload))
	binary.LittleEndian.PutUint32(b[start+8:], crc32.Update(seed, walCRC, b[start:start+8]))
	return b
}

// headerChecks reports whether b starts with a record header that checks
// with seed, and the record's whole length.
func headerChecks(b []byte, seed uint32) (int, bool) {
	if len(b) < walHeaderSize {
		return 0, false
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > walMaxRecordSize || crc32.Update(seed, walCRC, b[:8]) != binary.LittleEndian.Uint32(b[8:]) {
		return 0, false
	}
	return walHeaderSize + int(n), true
}

// decodeWALRecord decodes the record at the start of b, checksummed with
// seed, and returns it with its length. It returns errWALEnd when b does
// not start with a header that checks (the end of the written part, or
// damage), errWALChecksum with the record's length when the header checks
// but the payload does not or runs past b, and an ErrCorrupt error when
// the checksums match but the payload does not decode. The record's byte
// strings alias b.
func decodeWALRecord(b []byte, seed uint32) (*walAppend, int, error) {
	n, ok := headerChecks(b, seed)
	if !ok {
		return nil, 0, errWALEnd
	}
	if n > len(b) {
		return nil, n, errWALChecksum
	}
	payload := b[walHeaderSize:n]
	if crc32.Update(seed, walCRC, payload) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, n, errWALChecksum
	}
	a, err := decodeWALPayload(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: log record: %v", tasks.ErrCorrupt, err)
	}
	return a, n, nil
}

// decodeV1Record decodes a record of a segment without a header, as
// decodeWALRecord does; it has no errWALChecksum, as its header has no
// checksum of its own.
func decodeV1Record(b []byte) (*walAppend, int, error) {
	if len(b) < walV1HeaderSize {
		return nil, 0, errWALEnd
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > walMaxRecordSize || uint64(n) > uint64(len(b)-walV1HeaderSize) {
		return nil, 0, errWALEnd
	}
	payload := b[walV1HeaderSize : walV1HeaderSize+int(n)]
	if crc32.Checksum(payload, walCRC) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, errWALEnd
	}
	a, err := decodeWALPayload(payload)
	if err != nil || a.group != 0 {
		return nil, 0, fmt.Errorf("%w: log record: %v", tasks.ErrCorrupt, cmp.Or(err, errors.New("a new record in an old segment")))
	}
	return a, walV1HeaderSize + int(n), nil
}

func decodeWALPayload(p []byte) (*walAppend, error) {
	if len(p) == 0 || (p[0] != walVersion1 && p[0] != walVersion2) {
		return nil, errors.New("unknown record version")
	}
	v2 := p[0] == walVersion2
	p = p[1:]
	a := &walAppend{}
	nums := []*uint64{&a.seq, &a.version, &a.events}
	if v2 {
		nums = []*uint64{&a.seq, &a.group, &a.version, &a.events}
	}
	for _, u := range nums {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return nil, errors.New("bad number")
		}
		*u, p = v, p[n:]
	}
	v, n := binary.Varint(p)
	if n <= 0 {
		return nil, errors.New("bad time")
	}
	a.updated, p = v, p[n:]
	if len(p) == 0 || p[0] > 1 {
		return nil, errors.New("bad unfinished flag")
	}
	a.unfinished, p = p[0] == 1, p[1:]
	var id []byte
	for _, s := range []*[]byte{&id, &a.owner, &a.index, &a.encoded, &a.rec} {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return nil, errors.New("bad length")
		}
		*s, p = p[n:n+int(l)], p[n+int(l):]
	}
	if len(p) != 0 {
		return nil, errors.New("trailing bytes")
	}
	switch {
	case len(id) == 0:
		return nil, errors.New("no task id")
	case a.seq == 0:
		return nil, errors.New("sequence number 0")
	case v2 && (a.group == 0 || a.group > a.seq):
		return nil, errors.New("bad group")
	case a.events > a.version:
		return nil, errors.New("more events than the version")
	case (a.events == 0) != (len(a.encoded) == 0):
		return nil, errors.New("events count and events value disagree")
	case len(a.rec) == 0:
		return nil, errors.New("no task record")
	}
	a.id = a2a.TaskID(id)
	return a, nil
}

// walSegment is a closed segment: every record in it is synced.
type walSegment struct {
	path string
	last uint64 // the sequence number of its last record
}

// wal writes the log. append is called by the store's committer only; release
// by its applier.
type wal struct {
	base     string // the store's path; segments are base.wal-<seq>
	segment  int64  // a segment's size; 0 means walSegmentMax
	f        *os.File
	seed     uint32 // the open segment's records' CRC seed
	size     int64  // where the next record goes in f
	fileSize int64  // f's size
	next     uint64 // the sequence number of the next record
	buf      []byte
	syncer   *dataSyncer // made at the first append

	spare chan walSpare // the next segment, once filled; nil when none is being filled

	mu     sync.Mutex
	closed []walSegment // oldest first
	cur    string       // the open segment's path
}

func walPrefix(base string) string { return base + ".wal-" }

func segmentPath(base string, first uint64) string {
	return fmt.Sprintf("%s%016x", walPrefix(base), first)
}

// logUnchanged is a failed append that left the log as it was: its
// records are not in it, and the next append may be tried.
type logUnchanged struct{ error }

func (e logUnchanged) Unwrap() error { return e.error }

// isUnchanged reports whether err is a logUnchanged.
func isUnchanged(err error) bool {
	var u logUnchanged
	return errors.As(err, &u)
}

// append gives recs the next sequence numbers and makes them durable: one
// write and one fdatasync, through the syncer (see dataSyncer: on Linux the
// committer waits for it without holding a scheduler P). A write that does
// not fit in the open segment starts the next one. An error is a
// logUnchanged when none of recs is in the log, as when the next segment
// could not be made (a full disk) or a failed write could be undone
// (isUnchanged); otherwise what the log holds is unknown.
func (w *wal) append(recs []*walAppend) error {
	if len(recs) == 0 {
		return nil
	}
	if w.segment == 0 {
		w.segment = walSegmentMax
	}
	first := w.next
	encode := func() {
		w.buf = w.buf[:0]
		for i, a := range recs {
			a.seq, a.group = first+uint64(i), first
			w.buf = appendWALRecord(w.buf, a, w.seed)
		}
	}
	encode()
	// A write that would not fit starts a segment, unless the open one is
	// new: a write larger than a segment gets one to itself.
	if w.f == nil || (w.size > walSegmentHeaderSize && w.size+int64(len(w.buf)) > w.segment) {
		if err := w.rotate(first); err != nil {
			return logUnchanged{err}
		}
		encode() // with the new segment's salt
	}
	w.next = first + uint64(len(recs))
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		return w.undo(first, fmt.Errorf("write log %s: %w", w.cur, unpath(err)))
	}
	w.fileSize = max(w.fileSize, w.size+int64(len(w.buf)))
	if w.syncer == nil {
		w.syncer = newDataSyncer()
	}
	if err := w.syncer.sync(w.f); err != nil {
		return w.undo(first, fmt.Errorf("sync log %s: %w", w.cur, unpath(err)))
	}
	w.size += int64(len(w.buf))
	if cap(w.buf) > 1<<20 { // one large group does not pin its buffer
		w.buf = nil
	}
	return nil
}

// unpath drops the file name from an *os.PathError: a segment's file keeps
// the spare's name it was opened under.
func unpath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// undo puts the open segment back as it was before a failed write of the
// records from first on: what the write added past the segment's size is
// cut off, what it wrote inside it zeroed, and that synced. No part of a
// write whose writers were told it failed can then be replayed, and the
// next write goes where this one would have. (Zeroing also rewrites pages
// a failed fdatasync may have dropped from the cache while marking them
// clean.) It returns err, as a logUnchanged if the undo worked.
func (w *wal) undo(first uint64, err error) error {
	w.next = first
	n := int64(len(w.buf))
	uerr := func() error {
		fi, err := w.f.Stat()
		if err != nil {
			return err
		}
		if fi.Size() > w.fileSize {
			if err := w.f.Truncate(w.fileSize); err != nil {
				return err
			}
		}
		if end := min(w.size+n, w.fileSize); end > w.size {
			if _, err := w.f.WriteAt(make([]byte, end-w.size), w.size); err != nil {
				return err
			}
		}
		return syncData(w.f)
	}()
	if uerr != nil {
		return fmt.Errorf("%w (undoing it: %v)", err, uerr)
	}
	return logUnchanged{err}
}

// rotate closes the open segment (its records are synced) and starts a new
// one for the records from first on. A segment is written full of zeros
// after its header and synced, with its directory entry, before any record
// goes in: a record then overwrites allocated blocks, and its fdatasync
// need not journal the file's new size (on ext4 that was most of the log's
// CPU, and a third of its latency). Filling one takes about 10 ms, which
// every writer of the moment would wait for, so the next segment is filled
// in the background as a spare while this one fills, and rotate only
// renames it. A segment gets its name only once filled, so a segment file
// always has its header.
func (w *wal) rotate(first uint64) error {
	path := segmentPath(w.base, first)
	var sp walSpare
	if w.spare != nil {
		sp = <-w.spare // nearly always ready: a segment fills far slower
		w.spare = nil
	} else {
		sp = makeSpare(sparePath(w.base), w.segment)
	}
	if sp.err == nil {
		sp.err = os.Rename(sp.f.Name(), path)
		if sp.err == nil {
			sp.err = durable.SyncDir(filepath.Dir(path))
		}
	}
	if sp.err != nil {
		if sp.f != nil {
			sp.f.Close()
		}
		os.Remove(sparePath(w.base))
		os.Remove(path)
		return fmt.Errorf("start log segment %s: %w", path, sp.err)
	}
	w.mu.Lock()
	if w.f != nil {
		w.closed = append(w.closed, walSegment{path: w.cur, last: first - 1})
		w.f.Close()
	}
	w.f, w.cur, w.seed, w.size, w.fileSize = sp.f, path, sp.seed, walSegmentHeaderSize, max(w.segment, walSegmentHeaderSize)
	w.mu.Unlock()
	w.prepare()
	return nil
}

// ready makes sure the next segment can start: the spare is filled, or is
// filled now. Ping's probe of a log that could not take a write (a full
// disk) calls it, through the committer.
func (w *wal) ready() error {
	if w.segment == 0 {
		w.segment = walSegmentMax
	}
	if w.spare != nil {
		sp := <-w.spare
		if sp.err == nil {
			w.spare = make(chan walSpare, 1)
			w.spare <- sp
			return nil
		}
		w.spare = nil
		os.Remove(sparePath(w.base))
	}
	sp := makeSpare(sparePath(w.base), w.segment)
	if sp.err != nil {
		return sp.err
	}
	w.spare = make(chan walSpare, 1)
	w.spare <- sp
	return nil
}

// walSpare is a segment filled ahead of need, or why it could not be.
type walSpare struct {
	f    *os.File
	seed uint32
	err  error
}

// sparePath names the spare segment: not a segment name, so a crash that
// leaves it behind leaves nothing to replay.
func sparePath(base string) string { return base + ".wal.spare" }

// prepare fills the spare segment in the background; rotate or close takes it.
func (w *wal) prepare() {
	spare := make(chan walSpare, 1)
	w.spare = spare
	path, n := sparePath(w.base), w.segment
	go func() { spare <- makeSpare(path, n) }()
}

// makeSpare creates path with a segment header and zeros up to n bytes,
// durable.
func makeSpare(path string, n int64) walSpare {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return walSpare{err: err}
	}
	h, seed, err := newSegmentHeader()
	if err == nil {
		err = zeroFill(f, h, n)
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return walSpare{err: fmt.Errorf("fill %s: %w", path, err)}
	}
	return walSpare{f: f, seed: seed}
}

// zeroFill writes h, then zero bytes up to n, to f, and makes them and f's
// directory entry durable.
func zeroFill(f *os.File, h []byte, n int64) error {
	if _, err := f.WriteAt(h, 0); err != nil {
		return err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(len(h)); off < n; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return err
		}
	}
	if err := syncData(f); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(f.Name()))
}

// release deletes the closed segments whose records are all in bbolt, which
// has synced them: applied is the last sequence number applied.
func (w *wal) release(applied uint64) error {
	w.mu.Lock()
	var drop []walSegment
	for len(w.closed) > 0 && w.closed[0].last <= applied {
		drop = append(drop, w.closed[0])
		w.closed = w.closed[1:]
	}
	w.mu.Unlock()
	var errs []error
	for _, s := range drop {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close closes the open segment and deletes the spare and, with remove (the
// caller has applied every record), every segment.
func (w *wal) close(remove bool) error {
	if w.syncer != nil {
		w.syncer.close()
	}
	var errs []error
	if w.spare != nil {
		if spare := <-w.spare; spare.f != nil {
			errs = append(errs, spare.f.Close(), os.Remove(spare.f.Name()))
		}
		w.spare = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		errs = append(errs, w.f.Close())
		w.closed = append(w.closed, walSegment{path: w.cur, last: w.next - 1})
		w.f = nil
	}
	if !remove {
		return errors.Join(errs...)
	}
	for _, s := range w.closed {
		if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	w.closed = nil
	return errors.Join(errs...)
}

// walScan is what one segment holds, read without judging it: its records
// and its damaged spans, in file order.
type walScan struct {
	path   string
	first  uint64 // from its name
	legacy bool   // written before segments had a header
	items  []walItem
	end    int // where the zeros at its end start
	size   int // the file's size
}

// tail is where the segment's bytes that are not its zero-filled end stop,
// within the file: a torn write dropped from some item on ends there.
func (sc *walScan) tail() int {
	return min(max(sc.end, sc.items[len(sc.items)-1].end), sc.size)
}

// walItem is a record or a damaged span of a segment.
type walItem struct {
	off, end int        // its bytes; end may pass the file's end for a record cut short
	rec      *walAppend // nil: damaged
	whole    bool       // damaged: one record whose header checks
	torn     bool       // damaged: looks like a write cut short (a zeroed sector, or the file's end)
	guess    *walAppend // damaged and whole: its payload decoded anyway, to name its task in a recovery
}

// scanWAL lists and reads the segments of the log at base, oldest first.
// legacy says whether segments without a header may be old-format ones: only
// while the store file has not recorded that this format wrote its log
// (keyLogFormat). After that, a segment without a valid header is damaged.
func scanWAL(base string, legacy bool) ([]*walScan, error) {
	// Listed, not globbed: the store's path may hold pattern characters.
	entries, err := os.ReadDir(filepath.Dir(base))
	if err != nil {
		return nil, fmt.Errorf("read log: %w", err)
	}
	var scans []*walScan
	prefix := filepath.Base(walPrefix(base))
	for _, e := range entries {
		hex, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || len(hex) != 16 {
			continue // not a segment (a spare, or somebody's copy)
		}
		first, err := strconv.ParseUint(hex, 16, 64)
		if err != nil || first == 0 {
			continue
		}
		scans = append(scans, &walScan{path: filepath.Join(filepath.Dir(base), e.Name()), first: first})
	}
	slices.SortFunc(scans, func(a, b *walScan) int { return cmp.Compare(a.first, b.first) })
	for _, sc := range scans {
		data, err := os.ReadFile(sc.path)
		if err != nil {
			return nil, fmt.Errorf("read log: %w", err)
		}
		if err := sc.scan(data, legacy); err != nil {
			return nil, err
		}
	}
	return scans, nil
}

// scan reads data, the segment's bytes, into sc. It fails only on a record
// whose checksums match but whose payload does not decode, which no crash
// and no random damage makes.
func (sc *walScan) scan(data []byte, legacy bool) error {
	sc.end, sc.size = len(data), len(data)
	for sc.end > 0 && data[sc.end-1] == 0 {
		sc.end--
	}
	seed, ok := segmentSeed(data)
	off := walSegmentHeaderSize
	if !ok {
		if !legacy {
			// A segment gets its header, synced, before its name: no crash
			// leaves one without. Its records cannot be read.
			sc.items = append(sc.items, walItem{off: 0, end: max(sc.end, sc.size)})
			return nil
		}
		if sc.end == 0 {
			return nil // an old, empty segment
		}
		if len(data) >= 4 && bytes.Equal(data[:4], walMagic) {
			sc.items = append(sc.items, walItem{off: 0, end: sc.end}) // its header is damaged: nothing in it can be read
			return nil
		}
		sc.legacy, off = true, 0
	}
	for off < sc.end {
		var (
			a   *walAppend
			n   int
			err error
		)
		if sc.legacy {
			a, n, err = decodeV1Record(data[off:])
		} else {
			a, n, err = decodeWALRecord(data[off:], seed)
		}
		switch {
		case err == nil:
			sc.items = append(sc.items, walItem{off: off, end: off + n, rec: a})
			off += n
		case sc.legacy && errors.Is(err, errWALEnd):
			// The old rule: anything that does not decode ends the segment.
			sc.items = append(sc.items, walItem{off: off, end: sc.end, torn: true})
			off = sc.end
		case errors.Is(err, errWALChecksum):
			end := off + n
			it := walItem{off: off, end: end, whole: true, torn: end > len(data) || zeroSector(data, off+walHeaderSize, end)}
			if end <= len(data) {
				it.guess, _ = decodeWALPayload(data[off+walHeaderSize : end])
			}
			sc.items = append(sc.items, it)
			off = end
		case errors.Is(err, errWALEnd):
			next := off + 1
			for ; next < sc.end; next++ {
				if _, ok := headerChecks(data[next:], seed); ok {
					break
				}
			}
			sc.items = append(sc.items, walItem{off: off, end: next, torn: tornHeader(data, off)})
			off = next
		default:
			return &LogDamageError{File: sc.path, Offset: int64(off), Reason: err.Error()}
		}
	}
	return nil
}

// zeroSector reports whether data[from:end] holds a 512-byte sector of the
// file, or the part of one before end, that is all zeros, or runs past the
// file's end: what a write that did not reach the disk whole leaves.
func zeroSector(data []byte, from, end int) bool {
	if end > len(data) {
		return true
	}
	for s := (from + walSector - 1) / walSector * walSector; s < end; s += walSector {
		if allZero(data[s:min(s+walSector, end)]) {
			return true
		}
	}
	return false
}

// tornHeader reports whether the record header expected at off looks like
// part of a write that did not reach the disk whole: cut by the file's end,
// or zeros in the part of it in one sector.
func tornHeader(data []byte, off int) bool {
	h := data[off:min(off+walHeaderSize, len(data))]
	if len(h) < walHeaderSize {
		return true
	}
	k := (off/walSector+1)*walSector - off // the bytes of h in off's sector
	if k >= walHeaderSize {
		return allZero(h)
	}
	return allZero(h[:k]) || allZero(h[k:])
}

// walDrop is a span of the log left out of replay.
type walDrop struct {
	path     string
	off, end int
	from     uint64 // the first record it may have held
}

// walPlan is what opening replays of the log.
type walPlan struct {
	recs     []*walAppend // in order; some may be in bbolt already
	paths    []string     // every segment
	next     uint64       // the sequence number the next record gets
	torn     *walDrop     // the end of a write a crash cut short, dropped
	harmless []walDrop    // damage that held only records bbolt has
}

// tornCut finds the write a crash cut short at the end of sc, the log's
// last segment: the first damaged span, with its record not in bbolt,
// after which every span looks torn too and every record belongs to the
// same write. It returns the span's index and the record it starts at.
func tornCut(sc *walScan, applied uint64) (int, uint64, bool) {
	exp := sc.first
	for k, it := range sc.items {
		if it.rec != nil {
			exp = it.rec.seq + 1
			continue
		}
		if !it.torn || exp <= applied {
			continue
		}
		rest := sc.items[k+1:]
		if !slices.ContainsFunc(rest, func(r walItem) bool {
			if r.rec == nil {
				return !r.torn
			}
			return r.rec.seq < exp || r.rec.group > exp
		}) {
			return k, exp, true
		}
	}
	return 0, 0, false
}

// planWAL judges the log's segments against applied, the last record bbolt
// has: what to replay, or a [LogDamageError] for damage that may hold
// acknowledged writes bbolt lacks.
func planWAL(scans []*walScan, applied uint64) (*walPlan, error) {
	p := &walPlan{next: applied + 1}
	if len(scans) == 0 {
		return p, nil
	}
	cut := -1
	last := scans[len(scans)-1]
	if k, from, ok := tornCut(last, applied); ok {
		cut = k
		it := last.items[k]
		p.torn = &walDrop{path: last.path, off: it.off, end: last.tail(), from: from}
	}
	exp := scans[0].first
	if exp > applied+1 {
		return nil, &LogDamageError{File: scans[0].path, Reason: fmt.Sprintf(
			"the log starts at record %d, but the store holds records only up to %d: records %d to %d are missing (a deleted log segment?)",
			exp, applied, applied+1, exp-1)}
	}
	var pending *walItem // damage whose records are known once the next record is
	var pendingPath string
	resolve := func(upTo uint64, next string) error {
		d := *pending
		pending = nil
		if upTo < exp || upTo <= applied {
			p.harmless = append(p.harmless, walDrop{path: pendingPath, off: d.off, end: d.end, from: exp})
			return nil
		}
		what := fmt.Sprintf("%d bytes that are not records", d.end-d.off)
		if d.whole {
			what = fmt.Sprintf("a record of %d bytes whose checksum does not match", d.end-d.off)
		}
		lost := fmt.Sprintf("records %d to %d cannot be read", exp, upTo)
		switch upTo {
		case exp:
			lost = fmt.Sprintf("record %d cannot be read", exp)
		case math.MaxUint64:
			lost = fmt.Sprintf("records from %d on cannot be read", exp)
		}
		return &LogDamageError{File: pendingPath, Offset: int64(d.off), Reason: fmt.Sprintf("%s, %s; %s", what, next, lost)}
	}
	for i, sc := range scans {
		p.paths = append(p.paths, sc.path)
		if i > 0 && sc.first != exp {
			if sc.first < exp || pending == nil && sc.first-1 > applied {
				return nil, &LogDamageError{File: sc.path, Reason: fmt.Sprintf(
					"the segment starts at record %d, but the one before it ends at record %d (records %d to %d are missing: a deleted log segment?)",
					sc.first, exp-1, exp, sc.first-1)}
			}
			if pending != nil {
				if err := resolve(sc.first-1, "then the next segment"); err != nil {
					return nil, err
				}
			}
			exp = sc.first
		}
		if pending != nil {
			if err := resolve(exp-1, "then the next segment"); err != nil {
				return nil, err
			}
		}
		items := sc.items
		if sc == last && cut >= 0 {
			items = items[:cut]
		}
		for _, it := range items {
			if it.rec == nil {
				if pending != nil { // two in a row: one span
					pending.end, pending.whole = it.end, false
					continue
				}
				pending, pendingPath = &it, sc.path
				continue
			}
			a := it.rec
			switch {
			case a.seq < exp:
				return nil, &LogDamageError{File: sc.path, Offset: int64(it.off), Reason: fmt.Sprintf("record %d where %d was expected", a.seq, exp)}
			case pending != nil:
				if err := resolve(a.seq-1, "followed by later records"); err != nil {
					return nil, err
				}
			case a.seq > exp:
				return nil, &LogDamageError{File: sc.path, Offset: int64(it.off), Reason: fmt.Sprintf("record %d where %d was expected", a.seq, exp)}
			}
			p.recs = append(p.recs, a)
			exp = a.seq + 1
		}
	}
	if pending != nil {
		upTo := uint64(math.MaxUint64) // how many records the damage held is unknown
		if pending.whole && cut < 0 {
			upTo = exp
		}
		if err := resolve(upTo, "at the end of the log"); err != nil {
			return nil, err
		}
	}
	p.next = max(exp, applied+1)
	return p, nil
}

// walLoss is a span of the log handoff store recover gives up: damage, a
// missing segment, or the end of a write a crash cut short.
type walLoss struct {
	path     string
	off, end int
	from, to uint64 // the records it held, to 0 when not known
	torn     bool
}

// salvageWAL is planWAL for an operator who accepts losses: every record
// after applied that reads, in order; the records dropped that can still
// be named (those of the torn write at the end, and damaged ones whose
// payload decodes anyway); and what was given up.
func salvageWAL(scans []*walScan, applied uint64) (recs, dropped []*walAppend, losses []walLoss) {
	if len(scans) == 0 {
		return nil, nil, nil
	}
	last := scans[len(scans)-1]
	cut := -1
	var tornLoss *walLoss
	if k, from, ok := tornCut(last, applied); ok {
		cut = k
		tornLoss = &walLoss{path: last.path, off: last.items[k].off, end: last.tail(), from: from, torn: true}
		for _, it := range last.items[k:] {
			if a := cmp.Or(it.rec, it.guess); a != nil && a.seq > applied {
				dropped = append(dropped, a)
			}
		}
	}
	exp := applied + 1
	open := -1 // the loss whose last record is known at the next one read
	closeOpen := func(next uint64) {
		losses[open].to = next - 1 // below from when it held none
		open = -1
	}
	for i, sc := range scans {
		if sc.first > exp {
			if open >= 0 {
				closeOpen(sc.first)
			} else {
				losses = append(losses, walLoss{path: sc.path, from: exp, to: sc.first - 1})
			}
			exp = sc.first
		} else if open >= 0 && i > 0 && sc.first == exp {
			closeOpen(exp)
		}
		items := sc.items
		if sc == last && cut >= 0 {
			items = items[:cut]
		}
		for _, it := range items {
			if it.rec == nil {
				if it.guess != nil && it.guess.seq > applied {
					dropped = append(dropped, it.guess)
				}
				if open >= 0 && losses[open].path == sc.path {
					losses[open].end = min(it.end, sc.size)
					continue
				}
				losses = append(losses, walLoss{path: sc.path, off: it.off, end: min(it.end, sc.size), from: exp})
				open = len(losses) - 1
				continue
			}
			a := it.rec
			if a.seq < exp {
				continue // bbolt has it, or it repeats one read before
			}
			if open >= 0 {
				closeOpen(a.seq)
			} else if a.seq > exp {
				losses = append(losses, walLoss{path: sc.path, off: it.off, end: it.off, from: exp, to: a.seq - 1})
			}
			recs = append(recs, a)
			exp = a.seq + 1
		}
	}
	if tornLoss != nil {
		losses = append(losses, *tornLoss)
	}
	return recs, dropped, losses
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
