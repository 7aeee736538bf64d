package boltstore

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestDamagedHeaderOfLastSegment: a flipped bit in the last segment's magic,
// or its first sector zeroed, is damage (a segment gets its header, synced,
// before its name), not an old-format segment whose undecodable start is a
// torn write: the store refuses to open, naming the segment and offset 0,
// instead of dropping the segment's acknowledged writes.
func TestDamagedHeaderOfLastSegment(t *testing.T) {
	for _, mode := range []string{"flip byte 0", "zero first sector"} {
		t.Run(mode, func(t *testing.T) {
			img := crashedStore(t, 60, 16384)
			segs := segments(t, img)
			last := segs[len(segs)-1]
			b, err := os.ReadFile(last)
			if err != nil {
				t.Fatal(err)
			}
			if mode == "flip byte 0" {
				b[0] ^= 0x10
			} else {
				clear(b[:512])
			}
			if err := os.WriteFile(last, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(img, time.Second)
			if err == nil {
				s.Close()
				t.Fatal("opened a store whose last segment's header is damaged")
			}
			var de *LogDamageError
			if !errors.As(err, &de) || de.File != last || de.Offset != 0 || !errors.Is(err, tasks.ErrCorrupt) {
				t.Fatalf("refusal %v, want a LogDamageError naming %s at offset 0", err, last)
			}
		})
	}
}

// TestMetaPageCountCannotWrap: a meta page whose page count times the page
// size wraps around int64 is refused by the size check, before a page's
// overflow count could size an allocation.
func TestMetaPageCountCannotWrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fillStore(t, path, 20)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	ps := int(le.Uint32(b[16+8:]))
	var root uint64
	for _, off := range []int{0, ps} {
		m := b[off+16 : off+16+64]
		le.PutUint64(m[40:], le.Uint64(m[40:])+1<<52) // (count + 2^52) * 4096 wraps to count * 4096
		h := fnv.New64a()
		h.Write(m[:56])
		le.PutUint64(m[56:], h.Sum64()) // a meta checksum that matches: only crafted damage does this
		root = le.Uint64(m[16:])
	}
	le.PutUint32(b[int(root)*ps+12:], 0xFFFFFFFF) // the root page's overflow
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkBoltFile(path); !errors.Is(err, tasks.ErrCorrupt) {
		t.Fatalf("checkBoltFile = %v, want the file refused as damaged", err)
	}
}

// TestEmptyBranchPage: a branch page whose element count is 0 (one damaged
// 16-bit field) is refused before bbolt opens the file: bbolt's cursor
// reads its element 0 anyway and panics.
func TestEmptyBranchPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fillStore(t, path, 300)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	ps := int(le.Uint32(b[16+8:]))
	found, most := -1, 0
	for id := 2; id < len(b)/ps; id++ {
		p := b[id*ps:]
		if le.Uint64(p) == uint64(id) && le.Uint16(p[8:]) == boltBranchPage && int(le.Uint16(p[10:])) > most {
			found, most = id, int(le.Uint16(p[10:]))
		}
	}
	if found < 0 {
		t.Fatal("300 tasks made no branch page: the test needs one")
	}
	le.PutUint16(b[found*ps+10:], 0)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, time.Second)
	if err == nil {
		s.Close()
		t.Fatalf("opened a store whose branch page %d has no elements", found)
	}
	if !errors.Is(err, tasks.ErrCorrupt) {
		t.Fatalf("refusal %v, want ErrCorrupt", err)
	}
}

// TestWALCrashAcrossSegments: a crash that tears the first write of a new
// last segment, sector by sector, is never refused and keeps every write of
// the segment before it, whatever bbolt had applied.
func TestWALCrashAcrossSegments(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(7, 9))
	for trial := range 1000 {
		seq := uint64(1)
		mk := func(first uint64, writes int, tearLast bool) *walScan {
			data := rawSegment()
			seed, _ := segmentSeed(data)
			acked := 0
			for w := range writes {
				group := seq
				if w == writes-1 {
					acked = len(data)
				}
				for range 1 + rng.IntN(4) {
					a := testRecord(int(seq))
					a.rec = make([]byte, 20+rng.IntN(2000))
					for j := range a.rec {
						a.rec[j] = byte('a' + rng.IntN(26))
					}
					a.seq, a.group = seq, group
					data = appendWALRecord(data, a, seed)
					seq++
				}
			}
			end := len(data)
			data = append(data, make([]byte, 4096)...)
			if tearLast {
				for s := acked / walSector * walSector; s < end; s += walSector {
					if rng.IntN(2) == 0 {
						clear(data[max(s, acked):min(s+walSector, end)])
					}
				}
			}
			sc := &walScan{path: "seg", first: first}
			if err := sc.scan(data, false); err != nil {
				t.Fatal(err)
			}
			return sc
		}
		a := mk(1, 1+rng.IntN(4), false)
		ackedA := seq - 1
		b := mk(seq, 1, true)
		for _, applied := range []uint64{0, uint64(rng.IntN(int(ackedA) + 1)), ackedA} {
			p, err := planWAL([]*walScan{a, b}, applied)
			if err != nil {
				t.Fatalf("trial %d, %d applied: a crash's log refused: %v", trial, applied, err)
			}
			if uint64(len(p.recs)) < ackedA {
				t.Fatalf("trial %d: %d records kept, want the %d acknowledged", trial, len(p.recs), ackedA)
			}
		}
	}
}
