package boltstore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// FuzzScanWAL feeds the log's segment reader and its judge arbitrary bytes
// after a segment header, at any bbolt position: they must never panic, a
// record they read must be the bytes at its offset, and what planWAL
// replays must be in order and after no damage it did not judge.
func FuzzScanWAL(f *testing.F) {
	hdr := rawSegment()
	seed, _ := segmentSeed(hdr)
	var body []byte
	for i := range 4 {
		a := testRecord(i)
		a.seq, a.group = uint64(i+1), uint64(i/2*2+1)
		body = appendWALRecord(body, a, seed)
	}
	f.Add(body, uint64(0))
	f.Add(body, uint64(2))
	f.Add(body[:len(body)-5], uint64(0))
	flipped := bytes.Clone(body)
	flipped[len(flipped)/2] ^= 4
	f.Add(flipped, uint64(0))
	f.Add(append(bytes.Clone(body[:20]), make([]byte, 600)...), uint64(1))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, applied uint64) {
		applied %= 1 << 40
		data := append(bytes.Clone(hdr), b...)
		sc := &walScan{path: "seg", first: 1}
		if err := sc.scan(data, false); err != nil {
			var de *LogDamageError
			if !errors.As(err, &de) || !errors.Is(err, tasks.ErrCorrupt) {
				t.Fatalf("scan failed without naming the damage: %v", err)
			}
			return
		}
		for _, it := range sc.items {
			if it.off < walSegmentHeaderSize || it.end <= it.off {
				t.Fatalf("item [%d, %d) outside the records", it.off, it.end)
			}
			if it.rec != nil && !bytes.Equal(appendWALRecord(nil, it.rec, seed), data[it.off:it.end]) {
				t.Fatalf("record at %d re-encodes differently", it.off)
			}
		}
		p, err := planWAL([]*walScan{sc}, applied)
		if err != nil {
			if !errors.Is(err, tasks.ErrCorrupt) {
				t.Fatalf("refusal that is not ErrCorrupt: %v", err)
			}
			return
		}
		for i, a := range p.recs {
			if i > 0 && a.seq != p.recs[i-1].seq+1 {
				t.Fatalf("replay out of order: %d after %d", a.seq, p.recs[i-1].seq)
			}
		}
		if p.next <= applied {
			t.Fatalf("next record %d at or below bbolt's position %d", p.next, applied)
		}
		salvageWAL([]*walScan{sc}, applied)
	})
}

// FuzzDecodeWALRecord feeds the store's log reader arbitrary bytes: it must
// never panic, and a record it accepts must encode back to the same bytes.
func FuzzDecodeWALRecord(f *testing.F) {
	good := &walAppend{seq: 7, group: 6, id: "t1", version: 2, events: 1, updated: time.Unix(1, 2).UnixNano(), unfinished: true,
		owner: record.OwnerKey(tasks.Owner{Principal: "p"}), index: []byte("TASK_STATE_WORKING\x00c"),
		encoded: []byte{eventBatchV1, 0, 0, 0, 2, '{', '}'}, rec: []byte(`{"task":{}}`)}
	f.Add(appendWALRecord(nil, good, 0))
	f.Add(appendWALRecord(appendWALRecord(nil, good, 0), good, 0)[:20])
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, n, err := decodeWALRecord(b, 0)
		if err != nil {
			if errors.Is(err, errWALChecksum) && a == nil && n >= walHeaderSize {
				return // a header that checks, over a payload that does not
			}
			if a != nil || n != 0 {
				t.Fatalf("error %v with a record of %d bytes", err, n)
			}
			return
		}
		if again := appendWALRecord(nil, a, 0); !bytes.Equal(again, b[:n]) {
			t.Fatalf("accepted record re-encodes differently:\n%x\n%x", b[:n], again)
		}
	})
}
