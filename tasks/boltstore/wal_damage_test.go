package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// These tests damage a store's files on disk the ways issue 14 lists, on
// the image a crash leaves (files copied while the store runs, the applier
// held so that the log holds what bbolt lacks), and open it: damage that
// can lose an acknowledged write refuses, naming the file and the offset;
// what a crash leaves opens, saying what it dropped.

// lockedBuffer collects the default logger's output from the store's
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// captureLog sends the default logger to a buffer until the test ends.
func captureLog(t *testing.T) *lockedBuffer {
	t.Helper()
	buf := &lockedBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

// damageMarker is the metadata of the nth task a crashed store was given;
// it is in that task's log record, and in no other.
func damageMarker(n int) string { return fmt.Sprintf("marker-%03d-%s", n, strings.Repeat("x", 200)) }

// crashedStore opens a store holding task "applied" in bbolt, holds its
// applier, appends n tasks d000, d001, ... one write each (in the log only),
// and returns the image a crash leaves. segment, when not 0, is the log's
// segment size.
func crashedStore(t *testing.T, n int, segment int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if segment != 0 {
		s.log.segment = segment
	}
	first := walSnap("applied", 1, "in bbolt")
	if err := s.Append(t.Context(), first, []a2a.Event{first.Task}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(t.Context(), first.Owner, "applied", 0); err != nil { // waits for the applier
		t.Fatal(err)
	}
	release, done := holdApplier(t, s, nil)
	for i := range n {
		snap := walSnap(a2a.TaskID(fmt.Sprintf("d%03d", i)), 1, damageMarker(i))
		if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
	}
	img := crashImage(t, path)
	close(release)
	done.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return img
}

// segments lists the log segments of the store at path, oldest first.
func segments(t *testing.T, path string) []string {
	t.Helper()
	segs, err := filepath.Glob(walPrefix(path) + "*")
	if err != nil {
		t.Fatal(err)
	}
	segs = slices.DeleteFunc(segs, func(p string) bool { return strings.HasSuffix(p, ".spare") })
	slices.Sort(segs)
	return segs
}

// markerOffset is where task n's marker is in the segment file.
func markerOffset(t *testing.T, seg string, n int) int {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(b, []byte(damageMarker(n)))
	if off < 0 {
		t.Fatalf("task %d's record is not in %s", n, seg)
	}
	return off
}

// flipByte flips one bit of the byte at off in file.
func flipByte(t *testing.T, file string, off int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// writtenEnd is the offset just past the last byte that is not zero.
func writtenEnd(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return end
}

// wantRefused opens the store at path and wants it refused with an error
// naming file and an offset.
func wantRefused(t *testing.T, path, file string) error {
	t.Helper()
	s, err := Open(path, time.Second)
	if err == nil {
		s.Close()
		t.Fatalf("opened a store whose log is damaged (%s): acknowledged writes would be lost without a word", filepath.Base(file))
	}
	if !errors.Is(err, tasks.ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("refusal does not name the file %s and an offset: %v", file, err)
	}
	if segs := segments(t, path); len(segs) == 0 {
		t.Fatal("a refused store's log was deleted")
	}
	return err
}

// wantTasks opens the store at path and wants tasks d000 to d(n-1) in it.
func wantTasks(t *testing.T, path string, n int) {
	t.Helper()
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owner := tasks.Owner{Principal: "p"}
	for _, id := range []string{"applied"} {
		if _, err := s.Get(t.Context(), owner, a2a.TaskID(id)); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	for i := range n {
		if _, err := s.Get(t.Context(), owner, a2a.TaskID(fmt.Sprintf("d%03d", i))); err != nil {
			t.Fatalf("task d%03d: %v", i, err)
		}
	}
}

// TestDamageTornTail truncates the last segment inside its last record (a
// write a crash cut short): the store opens with every task but that last
// one, and a warning says how many bytes were dropped from which file.
func TestDamageTornTail(t *testing.T) {
	logged := captureLog(t)
	img := crashedStore(t, 5, 0)
	segs := segments(t, img)
	last := segs[len(segs)-1]
	end := writtenEnd(t, last)
	if err := os.Truncate(last, int64(end-7)); err != nil {
		t.Fatal(err)
	}
	wantTasks(t, img, 4)
	out := logged.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, last) || !strings.Contains(out, "bytes") {
		t.Fatalf("no warning naming %s and the bytes dropped; log:\n%s", last, out)
	}
}

// TestDamageFlippedByte flips one byte in the middle of the log, in a record
// followed by records of later writes: the store refuses to open.
func TestDamageFlippedByte(t *testing.T) {
	img := crashedStore(t, 5, 0)
	segs := segments(t, img)
	last := segs[len(segs)-1]
	flipByte(t, last, markerOffset(t, last, 2)+20)
	wantRefused(t, img, last)
}

// TestDamageMissingSegment deletes the oldest of two segments, records
// bbolt never applied: the store refuses to open, naming the segment that
// now starts the log.
func TestDamageMissingSegment(t *testing.T) {
	img := crashedStore(t, 40, 4096)
	segs := segments(t, img)
	if len(segs) < 2 {
		t.Fatalf("%d segments, want at least 2", len(segs))
	}
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, img, segs[1])
}

// TestDamageMiddleSegmentRemoved deletes a segment between two others.
func TestDamageMiddleSegmentRemoved(t *testing.T) {
	img := crashedStore(t, 40, 4096)
	segs := segments(t, img)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, img, segs[2])
}

// TestDamageAppliedOnly flips a byte in a record bbolt had applied before
// the crash: nothing is lost, so the store opens, with a warning.
func TestDamageAppliedOnly(t *testing.T) {
	logged := captureLog(t)
	img := crashedStore(t, 3, 0)
	segs := segments(t, img)
	last := segs[len(segs)-1]
	b, _ := os.ReadFile(last)
	off := bytes.Index(b, []byte("in bbolt"))
	if off < 0 {
		t.Fatal("the applied task's record is not in the log")
	}
	flipByte(t, last, off)
	wantTasks(t, img, 3)
	if out := logged.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, last) {
		t.Fatalf("no warning about the damage in %s; log:\n%s", last, out)
	}
}

// TestWALCrashNeverRefused tears the last write of a log the ways a crash
// can, many times over (the review that reverted the first attempt at this
// found refusals of what a crash left): a kill -9 leaves the write's start
// up to a page boundary; a power loss any subset of its 512-byte sectors;
// an operator's truncate any prefix. Some records hold a record's bytes
// (made with another salt) or runs of zeros. The log must always open, with
// every record of the earlier writes, whatever bbolt had applied of them.
func TestWALCrashNeverRefused(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(14, 2))
	record := func(i int) *walAppend {
		a := testRecord(i)
		n := 20 + rng.IntN(3000)
		switch rng.IntN(4) {
		case 0:
			a.rec = bytes.Repeat([]byte{'r'}, n)
		case 1:
			a.rec = append(make([]byte, n), 'z') // zeros, as a binary artifact may hold
		case 2:
			forged := testRecord(i + 1000)
			forged.seq, forged.group = uint64(i+500), uint64(i+500)
			a.rec = append(bytes.Repeat([]byte{'f'}, rng.IntN(600)), appendWALRecord(nil, forged, 0)...)
		default:
			a.rec = make([]byte, n)
			for j := range a.rec {
				a.rec[j] = byte(rng.IntN(256))
			}
		}
		return a
	}
	for trial := range 1000 {
		// The segment as the log writes it, in memory: a header, the
		// writes' records (each write's group is its first record), zeros.
		data := rawSegment()
		seed, _ := segmentSeed(data)
		seq := uint64(1)
		write := func() {
			group := seq
			for range 1 + rng.IntN(5) {
				a := record(int(seq))
				a.seq, a.group = seq, group
				data = appendWALRecord(data, a, seed)
				seq++
			}
		}
		for range 1 + rng.IntN(6) {
			write()
		}
		acked, ackedRecs := len(data), seq-1
		write()
		end := len(data)
		data = append(data, make([]byte, 8192)...)
		mode := rng.IntN(3)
		switch mode {
		case 0: // kill -9: the write's start, up to a page boundary
			cuts := []int{acked}
			for p := (acked/4096 + 1) * 4096; p < end; p += 4096 {
				cuts = append(cuts, p)
			}
			clear(data[cuts[rng.IntN(len(cuts))]:end])
		case 1: // power loss: any of its sectors missing
			for s := acked / walSector * walSector; s < end; s += walSector {
				if rng.IntN(2) == 0 {
					clear(data[max(s, acked):min(s+walSector, end)])
				}
			}
		case 2: // cut short
			data = data[:acked+rng.IntN(end-acked)]
		}
		sc := &walScan{path: "segment", first: 1}
		if err := sc.scan(data, false); err != nil {
			t.Fatalf("trial %d (mode %d): %v", trial, mode, err)
		}
		scans := []*walScan{sc}
		for _, applied := range []uint64{0, uint64(rng.Int64N(int64(ackedRecs) + 1)), ackedRecs} {
			p, err := planWAL(scans, applied)
			if err != nil {
				t.Fatalf("trial %d (mode %d, %d of %d records applied): a crash's log refused: %v", trial, mode, applied, ackedRecs, err)
			}
			if uint64(len(p.recs)) < ackedRecs {
				t.Fatalf("trial %d (mode %d): %d records read, %d acknowledged", trial, mode, len(p.recs), ackedRecs)
			}
		}
	}
}
