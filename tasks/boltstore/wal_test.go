package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

func testRecord(i int) *walAppend {
	return &walAppend{
		id:         a2a.TaskID("task-" + string(rune('a'+i%26))),
		version:    uint64(i + 1),
		events:     1,
		updated:    time.Unix(int64(i), 7).UnixNano(),
		unfinished: i%2 == 0,
		owner:      record.OwnerKey(tasks.Owner{Principal: "p", Tenant: "t"}),
		index:      []byte("TASK_STATE_WORKING\x00ctx"),
		encoded:    []byte{eventBatchV1, 0, 0, 0, 2, '{', '}'},
		rec:        bytes.Repeat([]byte{'r'}, 10+i),
	}
}

// TestWALRoundTrip writes records through two segments and reads them back.
func TestWALRoundTrip(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tasks.db")
	w := &wal{base: base, next: 1, segment: 4096}
	var want []*walAppend
	for i := range 5 {
		batch := []*walAppend{testRecord(2 * i), testRecord(2*i + 1)}
		if err := w.append(batch); err != nil {
			t.Fatal(err)
		}
		want = append(want, batch...)
		if i == 2 {
			w.size = w.segment // the next group starts a segment
		}
	}
	got, paths, next, err := readWAL(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || next != 11 {
		t.Fatalf("%d segments, next %d; want 2, 11", len(paths), next)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %d records differing from the %d written", len(got), len(want))
	}
	// Segments whose records are all applied go; the open one stays.
	if err := w.release(10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(paths[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("applied closed segment still there: %v", err)
	}
	if err := w.close(true); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(walPrefix(base) + "*"); len(left) != 0 {
		t.Fatalf("segments left after close: %v", left)
	}
	if _, err := os.Stat(sparePath(base)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spare segment left after close: %v", err)
	}
}

// TestWALSpare: a rotation takes the spare segment filled in the
// background, zeros and all, and starts the next one.
func TestWALSpare(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tasks.db")
	w := &wal{base: base, next: 1, segment: 4096}
	if err := w.append([]*walAppend{testRecord(0)}); err != nil {
		t.Fatal(err)
	}
	spare := <-w.spare // filled after the first segment started
	if spare.err != nil {
		t.Fatal(spare.err)
	}
	w.spare = make(chan walSpare, 1)
	w.spare <- spare
	w.size = w.segment
	if err := w.append([]*walAppend{testRecord(1)}); err != nil {
		t.Fatal(err)
	}
	if w.f != spare.f {
		t.Fatal("the second segment is not the spare")
	}
	got, _, _, err := readWAL(base)
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d records, %v", len(got), err)
	}
	if err := w.close(false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sparePath(base)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spare segment left after close: %v", err)
	}
}

// readWAL reads the log at base as opening a store that has applied
// nothing does.
func readWAL(base string) ([]*walAppend, []string, uint64, error) {
	scans, err := scanWAL(base, true) // old segments may be there, as in a store that never recorded its log format
	if err != nil {
		return nil, nil, 0, err
	}
	p, err := planWAL(scans, 0)
	if err != nil {
		return nil, nil, 0, err
	}
	return p.recs, p.paths, p.next, nil
}

// rawSegment is a segment holding recs, as given (seq and group set).
func rawSegment(recs ...*walAppend) []byte {
	h, seed, err := newSegmentHeader()
	if err != nil {
		panic(err)
	}
	for _, a := range recs {
		h = appendWALRecord(h, a, seed)
	}
	return h
}

// TestWALTornTail tears the last write of the last segment the ways a
// crash can: cut at every offset of its last record (the file's end),
// missing a 512-byte sector (power loss: the disk wrote some of the write's
// sectors), or zeros from a sector on (kill -9 between pages). Reading
// stops before it, and the earlier records all come back. A flipped bit in
// it is damage, not a tear: refused.
func TestWALTornTail(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tasks.db")
	w := &wal{base: base, next: 1, segment: 8192}
	big := testRecord(2)
	big.rec = bytes.Repeat([]byte{'r'}, 3000)
	for _, a := range []*walAppend{testRecord(0), testRecord(1), big} {
		if err := w.append([]*walAppend{a}); err != nil {
			t.Fatal(err)
		}
	}
	w.close(false)
	path := segmentPath(base, 1)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := int(w.size)
	start := end - len(appendWALRecord(nil, big, 0))
	if !allZero(whole[end:]) {
		t.Fatal("the segment's unused end is not zeros")
	}
	want := func(t *testing.T, what string) {
		t.Helper()
		got, _, next, err := readWAL(base)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(got) != 2 || next != 3 {
			t.Fatalf("%s: %d records, next %d; want 2, 3", what, len(got), next)
		}
	}
	for cut := start; cut < end; cut++ {
		if err := os.WriteFile(path, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		want(t, fmt.Sprintf("cut at %d", cut))
	}
	for sector := (start + walSector - 1) / walSector * walSector; sector < end; sector += walSector {
		torn := bytes.Clone(whole)
		clear(torn[sector : sector+walSector])
		os.WriteFile(path, torn, 0o600)
		want(t, fmt.Sprintf("sector at %d missing", sector))
		clear(torn[sector:])
		os.WriteFile(path, torn, 0o600)
		want(t, fmt.Sprintf("zeroed from %d", sector))
	}
	// The header's sector missing: its bytes in that sector are zeros.
	torn := bytes.Clone(whole)
	clear(torn[start:min(end, (start/walSector+1)*walSector)])
	os.WriteFile(path, torn, 0o600)
	want(t, "the header's sector missing")

	damaged := bytes.Clone(whole)
	damaged[end-3] ^= 1
	os.WriteFile(path, damaged, 0o600)
	var de *LogDamageError
	if _, _, _, err := readWAL(base); !errors.As(err, &de) || de.File != path || de.Offset != int64(start) {
		t.Fatalf("a flipped bit in the last record: %v", err)
	}
}

// TestWALTornWriteOfMany tears a write of several records where a power
// loss can: its first records' sectors missing and its last ones there.
// The records after the tear are of the same write (their group), so this
// is a crash's doing and opens, without any of the write; a record of a
// later write after the same damage is refused.
func TestWALTornWriteOfMany(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tasks.db")
	w := &wal{base: base, next: 1, segment: 1 << 16}
	if err := w.append([]*walAppend{testRecord(0)}); err != nil {
		t.Fatal(err)
	}
	acked := int(w.size)
	group := make([]*walAppend, 8)
	for i := range group {
		group[i] = testRecord(1 + i)
		group[i].rec = bytes.Repeat([]byte{'g'}, 700)
	}
	if err := w.append(group); err != nil {
		t.Fatal(err)
	}
	w.close(false)
	path := segmentPath(base, 1)
	whole, _ := os.ReadFile(path)
	torn := bytes.Clone(whole)
	sector := (acked/walSector + 1) * walSector
	clear(torn[acked:sector])                          // the rest of the first sector the write touched
	clear(torn[sector+walSector : sector+2*walSector]) // and one further in
	os.WriteFile(path, torn, 0o600)
	got, _, next, err := readWAL(base)
	if err != nil {
		t.Fatalf("a torn write of many records: %v", err)
	}
	if len(got) != 1 || next != 2 {
		t.Fatalf("a torn write of many records: %d records, next %d; want 1, 2", len(got), next)
	}

	// The same damage, then a later write: not a crash's doing.
	w = &wal{base: base, next: 1, segment: 1 << 16}
	os.Remove(path)
	w.append([]*walAppend{testRecord(0)})
	w.append(group)
	w.append([]*walAppend{testRecord(20)})
	w.close(false)
	whole, _ = os.ReadFile(path)
	clear(whole[acked:sector])
	os.WriteFile(path, whole, 0o600)
	var de *LogDamageError
	if _, _, _, err := readWAL(base); !errors.As(err, &de) || de.Offset != int64(acked) {
		t.Fatalf("damage followed by a later write: %v", err)
	}
}

// TestWALTaskBytesAreNotRecords: a task whose own bytes hold a whole log
// record (made with any salt but the segment's) inside a torn write is not
// taken for a record of a later write: the store opens.
func TestWALTaskBytesAreNotRecords(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tasks.db")
	w := &wal{base: base, next: 1, segment: 1 << 16}
	if err := w.append([]*walAppend{testRecord(0)}); err != nil {
		t.Fatal(err)
	}
	acked := int(w.size)
	forged := testRecord(5)
	forged.seq, forged.group = 1000, 1000
	evil := testRecord(1)
	evil.rec = append(bytes.Repeat([]byte{'e'}, 2000), appendWALRecord(nil, forged, 0)...)
	evil.rec = append(evil.rec, bytes.Repeat([]byte{'e'}, 100)...)
	if err := w.append([]*walAppend{evil}); err != nil {
		t.Fatal(err)
	}
	w.close(false)
	path := segmentPath(base, 1)
	b, _ := os.ReadFile(path)
	clear(b[acked : (acked/walSector+1)*walSector]) // its header's sector never reached the disk
	os.WriteFile(path, b, 0o600)
	if got, _, _, err := readWAL(base); err != nil || len(got) != 1 {
		t.Fatalf("a torn record holding a record's bytes: %d records, %v", len(got), err)
	}
}

// TestWALDamage refuses what a crash cannot leave: damage in a segment that
// is not the last, a gap between segments, a record out of sequence; files
// whose names are not segments' are left alone.
func TestWALDamage(t *testing.T) {
	write := func(t *testing.T, base string, first uint64, n int, size bool) {
		w := &wal{base: base, next: first, segment: 4096}
		for i := range n {
			if err := w.append([]*walAppend{testRecord(i)}); err != nil {
				t.Fatal(err)
			}
			if size {
				w.size = w.segment
			}
		}
		w.close(false)
	}
	t.Run("middle segment", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "tasks.db")
		write(t, base, 1, 3, true) // three segments of one record
		p := segmentPath(base, 2)
		b, _ := os.ReadFile(p)
		b[walSegmentHeaderSize+walHeaderSize+2] ^= 1
		os.WriteFile(p, b, 0o600)
		if _, _, _, err := readWAL(base); !errors.Is(err, tasks.ErrCorrupt) {
			t.Fatalf("damaged middle segment: %v", err)
		}
	})
	t.Run("gap", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "tasks.db")
		write(t, base, 1, 3, true)
		os.Remove(segmentPath(base, 2))
		if _, _, _, err := readWAL(base); !errors.Is(err, tasks.ErrCorrupt) {
			t.Fatalf("gap between segments: %v", err)
		}
	})
	t.Run("stray names", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "tasks.db")
		write(t, base, 1, 1, false)
		for _, n := range []string{"nothex", "0000000000000002.bak", "000000000000000x", "0000000000000000"} {
			os.WriteFile(walPrefix(base)+n, []byte("junk"), 0o600)
		}
		os.WriteFile(sparePath(base), []byte("junk"), 0o600)
		got, paths, _, err := readWAL(base)
		if err != nil || len(got) != 1 || len(paths) != 1 {
			t.Fatalf("files that are not segments: %d records from %v, %v", len(got), paths, err)
		}
	})
	t.Run("sequence", func(t *testing.T) {
		base := filepath.Join(t.TempDir(), "tasks.db")
		write(t, base, 5, 1, false)
		os.Rename(segmentPath(base, 5), segmentPath(base, 4)) // holds record 5 where 4 should be
		if _, _, _, err := readWAL(base); !errors.Is(err, tasks.ErrCorrupt) {
			t.Fatalf("record out of sequence: %v", err)
		}
	})
}

// TestOpenReplaysLog writes a log by hand for a store that does not have
// its records, plus one it has: opening applies the missing ones only, and
// deletes the log.
func TestOpenReplaysLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	owner := tasks.Owner{Principal: "p"}
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	first := &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Unix(1, 0)}
	if err := s.Append(t.Context(), first, []a2a.Event{task}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The log as a crash would leave it: the append bbolt has, then one it
	// lacks.
	codec := newRecordCodec()
	record := func(seq uint64, snap *tasks.Snapshot, ev a2a.Event) *walAppend {
		enc, err := encodeEvents([]a2a.Event{ev})
		if err != nil {
			t.Fatal(err)
		}
		rec, mem, err := codec.write(snap, []a2a.Event{ev})
		if err != nil {
			t.Fatal(err)
		}
		codec.remember(snap.Task.ID, mem, true)
		return &walAppend{seq: seq, group: seq, id: snap.Task.ID, version: snap.Version, events: 1, updated: snap.Updated.UnixNano(),
			unfinished: tasks.IsUnfinished(snap.Task.Status.State), owner: record.OwnerKey(snap.Owner),
			index: append(append([]byte(snap.Task.Status.State), 0), snap.Task.ContextID...), encoded: enc, rec: rec}
	}
	done := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	second, err := tasks.Apply(first, done, time.Unix(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	log := rawSegment(record(1, first, task), record(2, second, done))
	if err := os.WriteFile(segmentPath(path, 1), log, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(t.Context(), owner, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after replay: version %d, state %s", got.Version, got.Task.Status.State)
	}
	evs, err := s.Events(t.Context(), owner, "t1", 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("after replay: %d events, %v", len(evs), err)
	}
	if left, _ := filepath.Glob(walPrefix(path) + "*"); len(left) != 0 {
		t.Fatalf("log left after replay: %v", left)
	}
	// The next append follows the replayed version, and the log numbers on.
	if err := s.Append(t.Context(), second, []a2a.Event{done}); !errors.Is(err, tasks.ErrConflict) {
		t.Fatalf("append of a replayed version: %v", err)
	}
	if s.log.next != 3 {
		t.Fatalf("next sequence number %d, want 3", s.log.next)
	}
}

// TestOpenRefusesBadLog: a record that does not follow what bbolt holds is
// refused at open, and the store stays closed over it.
func TestOpenRefusesBadLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	a := testRecord(4) // version 5 of a task bbolt has never seen
	a.seq, a.group = 1, 1
	if err := os.WriteFile(segmentPath(path, 1), rawSegment(a), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, time.Second); !errors.Is(err, tasks.ErrConflict) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("log record out of step with the store: %v", err)
	}
	if _, err := os.Stat(segmentPath(path, 1)); err != nil {
		t.Fatalf("a refused log must stay for inspection: %v", err)
	}
}

// appendV1Record is how records were written before segments had a
// header: an 8-byte header (length, CRC-32C of the payload) and a payload
// without the group.
func appendV1Record(b []byte, a *walAppend) []byte {
	var p []byte
	p = append(p, walVersion1)
	for _, u := range []uint64{a.seq, a.version, a.events} {
		p = binary.AppendUvarint(p, u)
	}
	p = binary.AppendVarint(p, a.updated)
	p = append(p, map[bool]byte{false: 0, true: 1}[a.unfinished])
	for _, s := range [][]byte{[]byte(a.id), a.owner, a.index, a.encoded, a.rec} {
		p = binary.AppendUvarint(p, uint64(len(s)))
		p = append(p, s...)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(p, walCRC))
	return append(b, p...)
}

// TestWALOldSegments: a log an older Handoff left at a crash (segments
// without a header) is still read, with its rule: the end of the last
// segment may be torn; anything else that does not decode is refused.
func TestWALOldSegments(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tasks.db")
	var first, second []byte
	for i := range 2 {
		a := testRecord(i)
		a.seq = uint64(i + 1)
		first = appendV1Record(first, a)
	}
	for i := 2; i < 4; i++ {
		a := testRecord(i)
		a.seq = uint64(i + 1)
		second = appendV1Record(second, a)
	}
	os.WriteFile(segmentPath(base, 1), append(bytes.Clone(first), make([]byte, 100)...), 0o600)
	os.WriteFile(segmentPath(base, 3), second[:len(second)-4], 0o600) // the last record torn
	got, _, next, err := readWAL(base)
	if err != nil || len(got) != 3 || next != 4 {
		t.Fatalf("old segments: %d records, next %d, %v; want 3, 4", len(got), next, err)
	}
	for i, a := range got {
		if a.seq != uint64(i+1) || a.group != 0 {
			t.Fatalf("old record %d: seq %d, group %d", i, a.seq, a.group)
		}
	}
	damaged := bytes.Clone(first)
	damaged[walV1HeaderSize+3] ^= 1
	os.WriteFile(segmentPath(base, 1), damaged, 0o600)
	if _, _, _, err := readWAL(base); !errors.Is(err, tasks.ErrCorrupt) {
		t.Fatalf("damage in an old segment that is not the last: %v", err)
	}
}

// TestWALDamagedHeaders: a segment whose header does not check, and a
// record whose length is damaged (what follows is found by the next header
// that checks), are refused when acknowledged records follow.
func TestWALDamagedHeaders(t *testing.T) {
	write := func(t *testing.T) (string, string) {
		base := filepath.Join(t.TempDir(), "tasks.db")
		w := &wal{base: base, next: 1, segment: 1 << 16}
		for i := range 4 {
			if err := w.append([]*walAppend{testRecord(i)}); err != nil {
				t.Fatal(err)
			}
		}
		w.close(false)
		return base, segmentPath(base, 1)
	}
	t.Run("segment header", func(t *testing.T) {
		base, path := write(t)
		b, _ := os.ReadFile(path)
		b[6] ^= 1 // the salt
		os.WriteFile(path, b, 0o600)
		var de *LogDamageError
		if _, _, _, err := readWAL(base); !errors.As(err, &de) || de.Offset != 0 || de.File != path {
			t.Fatalf("damaged segment header: %v", err)
		}
	})
	t.Run("record length", func(t *testing.T) {
		base, path := write(t)
		b, _ := os.ReadFile(path)
		second := walSegmentHeaderSize + len(appendWALRecord(nil, testRecord(0), 0))
		b[second+1] ^= 0x40 // the second record's length
		os.WriteFile(path, b, 0o600)
		var de *LogDamageError
		if _, _, _, err := readWAL(base); !errors.As(err, &de) || de.Offset != int64(second) {
			t.Fatalf("damaged record length: %v", err)
		}
	})
	t.Run("two records in a row", func(t *testing.T) {
		base, path := write(t)
		b, _ := os.ReadFile(path)
		second := walSegmentHeaderSize + len(appendWALRecord(nil, testRecord(0), 0))
		third := second + len(appendWALRecord(nil, testRecord(1), 0))
		b[second+20] ^= 1
		b[third+20] ^= 1
		os.WriteFile(path, b, 0o600)
		var de *LogDamageError
		if _, _, _, err := readWAL(base); !errors.As(err, &de) || de.Offset != int64(second) || !strings.Contains(de.Reason, "records 2 to 3") {
			t.Fatalf("two damaged records in a row: %v", err)
		}
	})
}
