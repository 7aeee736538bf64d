package tasks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/durable"
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
// sequence number, 16 hex digits>, each a run of records:
//
//	uint32 little-endian length of the payload
//	uint32 little-endian CRC-32C of the payload
//	payload: walVersion1, then uvarints seq, version, events count,
//	  varint updated (Unix nanoseconds), byte unfinished (0 or 1), and five
//	  uvarint-length-prefixed byte strings: task id, owner key, index value,
//	  events value, task record.
//
// A record's sequence number is one more than the previous one's, across
// segments; the rest of a segment is zeros (segments are zero-filled when
// made). bbolt keeps the sequence number of the last record it applied, in
// the transaction that applies it. Opening the store replays the records
// after that number, in bbolt transactions that sync, then deletes the
// segments. A crash can leave only the last write of the last segment torn,
// since a segment is closed only after its last write was synced: replay
// stops there. Anything else that does not decode is corruption, and the
// store does not open. (A flipped bit inside the last segment reads as a
// torn write, so the records after it are lost without an error. Telling
// the two apart safely takes more than naming each record's write: a
// checksum seeded per segment, so that a task's own bytes cannot pass for
// a record inside a torn one; replay that knows what bbolt already holds;
// and walking past damaged records by their lengths.)
//
// Written by hand: no Go library offers a log of checksummed records
// shared by many writers with one fsync per group.

const (
	walVersion1      = 1
	walHeaderSize    = 8
	walSegmentMax    = 16 << 20 // a segment's size: one is closed once this full
	walMaxRecordSize = 1 << 30  // a longer length can only be damage
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// errWALEnd means the bytes ended, or stopped being a record, where a record
// was expected: the end of a segment, or a torn write at its tail.
var errWALEnd = errors.New("end of log")

// walAppend is one accepted [BoltStore.Append]: everything its bbolt
// transaction writes, ready made.
type walAppend struct {
	seq        uint64
	id         a2a.TaskID
	version    uint64 // the task's version after the append
	events     uint64 // how many events it appends
	updated    int64  // Unix nanoseconds
	unfinished bool
	owner      []byte // ownerKey
	index      []byte // the by-owner index value: state, 0, context id
	encoded    []byte // the events value; empty when events is 0
	rec        []byte // the task record
}

// appendWALRecord appends a's record, header included, to b.
func appendWALRecord(b []byte, a *walAppend) []byte {
	start := len(b)
	b = append(b, make([]byte, walHeaderSize)...)
	b = append(b, walVersion1)
	b = binary.AppendUvarint(b, a.seq)
	b = binary.AppendUvarint(b, a.version)
	b = binary.AppendUvarint(b, a.events)
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
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, walCRC))
	return b
}

// decodeWALRecord decodes the record at the start of b and returns it with
// its length. It returns errWALEnd when b does not start with a whole record
// whose checksum matches (the end of the written part, or a torn write), and
// an ErrCorrupt error when the checksum matches but the payload does not
// decode. The record's byte strings alias b.
func decodeWALRecord(b []byte) (*walAppend, int, error) {
	if len(b) < walHeaderSize {
		return nil, 0, errWALEnd
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > walMaxRecordSize || uint64(n) > uint64(len(b)-walHeaderSize) {
		return nil, 0, errWALEnd
	}
	payload := b[walHeaderSize : walHeaderSize+int(n)]
	if crc32.Checksum(payload, walCRC) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, errWALEnd
	}
	a, err := decodeWALPayload(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: log record: %v", ErrCorrupt, err)
	}
	return a, walHeaderSize + int(n), nil
}

func decodeWALPayload(p []byte) (*walAppend, error) {
	if len(p) == 0 || p[0] != walVersion1 {
		return nil, errors.New("unknown record version")
	}
	p = p[1:]
	a := &walAppend{}
	for _, u := range []*uint64{&a.seq, &a.version, &a.events} {
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
	base    string // the store's path; segments are base.wal-<seq>
	segment int64  // a segment's size; 0 means walSegmentMax
	f       *os.File
	size    int64
	next    uint64 // the sequence number of the next record
	buf     []byte
	syncer  *dataSyncer // made at the first append

	spare chan walSpare // the next segment, once filled; nil when none is being filled

	mu     sync.Mutex
	closed []walSegment // oldest first
	cur    string       // the open segment's path
}

func walPrefix(base string) string { return base + ".wal-" }

func segmentPath(base string, first uint64) string {
	return fmt.Sprintf("%s%016x", walPrefix(base), first)
}

// append gives recs the next sequence numbers and makes them durable: one
// write and one fdatasync, through the syncer (see dataSyncer: on Linux the
// committer waits for it without holding a scheduler P).
func (w *wal) append(recs []*walAppend) error {
	if len(recs) == 0 {
		return nil
	}
	if w.segment == 0 {
		w.segment = walSegmentMax
	}
	if w.f == nil || w.size >= w.segment {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	w.buf = w.buf[:0]
	for _, a := range recs {
		a.seq = w.next
		w.next++
		w.buf = appendWALRecord(w.buf, a)
	}
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		return fmt.Errorf("write log %s: %w", w.f.Name(), err)
	}
	if w.syncer == nil {
		w.syncer = newDataSyncer()
	}
	if err := w.syncer.sync(w.f); err != nil {
		return fmt.Errorf("sync log %s: %w", w.f.Name(), err)
	}
	w.size += int64(len(w.buf))
	if cap(w.buf) > 1<<20 { // one large group does not pin its buffer
		w.buf = nil
	}
	return nil
}

// rotate closes the open segment (its records are synced) and starts a new
// one. A segment is written full of zeros and synced, with its directory
// entry, before any record goes in: a record then overwrites allocated
// blocks, and its fdatasync need not journal the file's new size (on ext4
// that was most of the log's CPU, and a third of its latency). Filling one
// takes about 10 ms, which every writer of the moment would wait for, so
// the next segment is filled in the background as a spare while this one
// fills, and rotate only renames it.
func (w *wal) rotate() error {
	path := segmentPath(w.base, w.next)
	var f *os.File
	if w.spare != nil {
		spare := <-w.spare // nearly always ready: a segment fills far slower
		w.spare = nil
		if spare.err == nil {
			spare.err = os.Rename(spare.f.Name(), path)
			if spare.err == nil {
				spare.err = durable.SyncDir(filepath.Dir(path))
			}
		}
		if spare.err != nil {
			if spare.f != nil {
				spare.f.Close()
			}
			os.Remove(sparePath(w.base))
			os.Remove(path)
			return fmt.Errorf("start log segment %s: %w", path, spare.err)
		}
		f = spare.f
	} else {
		var err error
		if f, err = newSegment(path, w.segment); err != nil {
			return err
		}
	}
	w.mu.Lock()
	if w.f != nil {
		w.closed = append(w.closed, walSegment{path: w.cur, last: w.next - 1})
		w.f.Close()
	}
	w.f, w.cur, w.size = f, path, 0
	w.mu.Unlock()
	w.prepare()
	return nil
}

// walSpare is a segment filled ahead of need, or why it could not be.
type walSpare struct {
	f   *os.File
	err error
}

// sparePath names the spare segment: not a segment name, so a crash that
// leaves it behind leaves nothing to replay.
func sparePath(base string) string { return base + ".wal.spare" }

// prepare fills the spare segment in the background; rotate or close takes it.
func (w *wal) prepare() {
	spare := make(chan walSpare, 1)
	w.spare = spare
	go func() {
		f, err := newSegment(sparePath(w.base), w.segment)
		spare <- walSpare{f, err}
	}()
}

// newSegment creates path filled with n zeros, durable.
func newSegment(path string, n int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start log segment: %w", err)
	}
	if err := zeroFill(f, n); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("start log segment %s: %w", path, err)
	}
	return f, nil
}

// zeroFill writes n zero bytes to f and makes them and f's directory entry
// durable.
func zeroFill(f *os.File, n int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(zeros)) {
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

// readWAL reads the segments of the log at base in order and returns their
// records, the paths of the segments, and the sequence number the next
// record gets. A torn record ends the last segment; any other damage is an
// ErrCorrupt error.
func readWAL(base string) (recs []*walAppend, paths []string, next uint64, err error) {
	// Listed, not globbed: the store's path may hold pattern characters.
	entries, err := os.ReadDir(filepath.Dir(base))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read log: %w", err)
	}
	type seg struct {
		path  string
		first uint64
	}
	var segs []seg
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
		segs = append(segs, seg{filepath.Join(filepath.Dir(base), e.Name()), first})
	}
	slices.SortFunc(segs, func(a, b seg) int { return cmpUint(a.first, b.first) })
	next = 1
	for i, s := range segs {
		data, err := os.ReadFile(s.path)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read log: %w", err)
		}
		paths = append(paths, s.path)
		if i > 0 && s.first != next {
			return nil, nil, 0, fmt.Errorf("%w: log segment %s: starts at %d, expected %d", ErrCorrupt, s.path, s.first, next)
		}
		next = s.first
		for off := 0; off < len(data); {
			a, n, err := decodeWALRecord(data[off:])
			if errors.Is(err, errWALEnd) {
				// Zeros are the segment's unused end. Anything else can only
				// be a torn last write, never acknowledged, at the end of the
				// last segment.
				if i == len(segs)-1 || allZero(data[off:]) {
					break
				}
				return nil, nil, 0, fmt.Errorf("%w: log segment %s: damaged record at offset %d", ErrCorrupt, s.path, off)
			}
			if err != nil {
				return nil, nil, 0, fmt.Errorf("log segment %s, offset %d: %w", s.path, off, err)
			}
			if a.seq != next {
				return nil, nil, 0, fmt.Errorf("%w: log segment %s: record %d where %d was expected", ErrCorrupt, s.path, a.seq, next)
			}
			recs = append(recs, a)
			next++
			off += n
		}
	}
	return recs, paths, next, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
