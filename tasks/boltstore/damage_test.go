package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// fillStore appends n tasks with some bulk to a new store at path and
// closes it: a file of many pages.
func fillStore(t *testing.T, path string, n int) {
	t.Helper()
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		snap := walSnap(a2a.TaskID(fmt.Sprintf("b%04d", i)), 1, strings.Repeat("b", 2000))
		if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTruncatedStoreFile cuts tasks.db in half: opening it is refused with
// an error naming the file, not a crash (bbolt faults on a mapped file
// shorter than its meta page says).
func TestTruncatedStoreFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fillStore(t, path, 300)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{fi.Size() / 2, 4096 + 100, 10} {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, time.Second)
		if err == nil {
			s.Close()
			t.Fatalf("opened tasks.db truncated to %d bytes", size)
		}
		if !errors.Is(err, tasks.ErrCorrupt) || !strings.Contains(err.Error(), "tasks.db is damaged") {
			t.Fatalf("truncated to %d bytes: %v", size, err)
		}
	}
}

// TestStoreFileBadMeta flips a byte in each of tasks.db's two meta pages:
// refused, naming the file.
func TestStoreFileBadMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fillStore(t, path, 3)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[16+20] ^= 1   // meta 0's root page id
	b[4096+16] ^= 1 // meta 1's magic
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, time.Second)
	if err == nil {
		s.Close()
		t.Fatal("opened tasks.db with both meta pages damaged")
	}
	if !errors.Is(err, tasks.ErrCorrupt) || !strings.Contains(err.Error(), "tasks.db is damaged") {
		t.Fatalf("both meta pages damaged: %v", err)
	}
}

// mountSmall mounts a tmpfs of size bytes for the test: a disk that fills
// for real. It needs root (CAP_SYS_ADMIN), as the project's test machine has.
func mountSmall(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs for a real ENOSPC (needs root): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for i := range chunk {
		chunk[i] = 1
	}
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return p
		}
	}
}

// TestDiskFullRecovers fills the store's disk for real: writes fail and the
// store reports itself not ready; once space is freed it is ready again
// without being reopened, every acknowledged write is there, and new
// writes go in.
func TestDiskFullRecovers(t *testing.T) {
	dir := mountSmall(t, 3<<20)
	path := filepath.Join(dir, "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.log.segment = 64 << 10
	owner := tasks.Owner{Principal: "p"}
	var acked []a2a.TaskID
	appendOne := func(i int) error {
		snap := walSnap(a2a.TaskID(fmt.Sprintf("f%04d", i)), 1, strings.Repeat("f", 3000))
		err := s.Append(t.Context(), snap, []a2a.Event{snap.Task})
		if err == nil {
			acked = append(acked, snap.Task.ID)
		}
		return err
	}
	for i := range 5 {
		if err := appendOne(i); err != nil {
			t.Fatal(err)
		}
	}
	filler := fillDisk(t, dir)
	var failed error
	i := 5
	for ; i < 5000 && failed == nil; i++ {
		failed = appendOne(i)
		if failed == nil && i%50 == 0 {
			// A read makes the applier apply now: bbolt needs room too.
			s.Events(t.Context(), owner, acked[0], 0)
		}
	}
	if failed == nil {
		t.Fatalf("%d appends to a full disk all succeeded", i)
	}
	t.Logf("append %d failed on the full disk: %v", i, failed)
	if !errors.Is(failed, tasks.ErrStoreFull) {
		t.Errorf("append on the full disk: err = %v, want tasks.ErrStoreFull (the engine writes it again later)", failed)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Fatal("store ready while writes fail for want of space")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := s.Ping(t.Context())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("store still not ready 15s after space was freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	for j := range 5 {
		if err := appendOne(10000 + j); err != nil {
			t.Fatalf("append after space was freed: %v", err)
		}
	}
	for _, id := range acked {
		if _, err := s.Events(t.Context(), owner, id, 0); err != nil {
			t.Fatalf("acknowledged task %s: %v", id, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close after recovery: %v", err)
	}
	s2, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, id := range acked {
		if _, err := s2.Get(t.Context(), owner, id); err != nil {
			t.Fatalf("acknowledged task %s after reopening: %v", id, err)
		}
	}
}

// TestDiskFullApplyRecovers fills the disk when the log still has room
// (its segment and spare are made) but bbolt needs new pages: applying
// stalls, reads that need it and the readiness check fail, and once space
// is freed the applier's next try catches up, with nothing lost.
func TestDiskFullApplyRecovers(t *testing.T) {
	dir := mountSmall(t, 4<<20)
	path := filepath.Join(dir, "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.log.segment = 1 << 20
	owner := tasks.Owner{Principal: "p"}
	var acked []a2a.TaskID
	appendOne := func(i int) error {
		snap := walSnap(a2a.TaskID(fmt.Sprintf("g%04d", i)), 1, strings.Repeat("g", 3000))
		err := s.Append(t.Context(), snap, []a2a.Event{snap.Task})
		if err == nil {
			acked = append(acked, snap.Task.ID)
		}
		return err
	}
	if err := appendOne(0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(t.Context(), owner, acked[0], 0); err != nil {
		t.Fatal(err)
	}
	// The spare segment is made in the background: filling the disk
	// before it has its room would fail it and free that room again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if fi, err := os.Stat(sparePath(path)); err == nil && fi.Size() == s.log.segment {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare segment within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	filler := fillDisk(t, dir)
	var stalled error
	for i := 1; i < 120 && stalled == nil; i++ { // 120 records fit in the segment
		if err := appendOne(i); err != nil {
			t.Fatalf("append %d, with room in the log: %v", i, err)
		}
		_, stalled = s.Events(t.Context(), owner, acked[i], 0)
	}
	if stalled == nil {
		t.Fatal("bbolt applied everything on a full disk: the test did not fill it")
	}
	t.Logf("read with bbolt unable to apply: %v", stalled)
	if err := s.Ping(t.Context()); err == nil {
		t.Fatal("store ready while bbolt cannot apply")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for s.Ping(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("store still not ready 15s after space was freed: %v", s.Ping(t.Context()))
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	for _, id := range acked {
		if _, err := s.Events(t.Context(), owner, id, 0); err != nil {
			t.Fatalf("acknowledged task %s: %v", id, err)
		}
	}
}

// TestStoreFileDamagedPages damages, in turn, each field bbolt follows in
// every page of a store file (the page's id, type, element count and
// overflow, its first element's position, sizes and child) and opens it:
// the store is refused as damaged, or opens and reads, and the process
// never crashes (before, a bad page id was a panic in a goroutine of
// bbolt's own).
func TestStoreFileDamagedPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	fillStore(t, path, 100)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	refused, opened := 0, 0
	for page := 2; page < len(whole)/ps; page += 1 + page/16 { // every page of the first ones, then a sample

		for _, field := range []int{0, 1, 8, 10, 12, 16, 20, 24, 28} {
			b := bytes.Clone(whole)
			b[page*ps+field] ^= 0x41
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, time.Second)
			if err != nil {
				if !errors.Is(err, tasks.ErrCorrupt) || !strings.Contains(err.Error(), "tasks.db is damaged") {
					t.Fatalf("page %d byte %d: %v", page, field, err)
				}
				refused++
				continue
			}
			opened++
			s.List(t.Context(), tasks.ListQuery{Owner: tasks.Owner{Principal: "p"}, PageSize: 1000})
			s.Close()
		}
	}
	t.Logf("%d damaged files refused, %d opened (damage bbolt does not follow)", refused, opened)
	if refused == 0 {
		t.Fatal("no damaged page was refused")
	}
}

// TestLogWriteFailureUndone: a write larger than a segment gets one to
// itself and grows it; on a full disk that write fails part way. The log
// undoes it (cut back, zeroed, synced), so its writer's error is the whole
// truth: after space is freed the next write goes where it would have,
// and reopening replays every acknowledged write and not the failed one.
func TestLogWriteFailureUndone(t *testing.T) {
	dir := mountSmall(t, 2<<20)
	path := filepath.Join(dir, "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.log.segment = 64 << 10
	owner := tasks.Owner{Principal: "p"}
	small := walSnap("small", 1, "s")
	if err := s.Append(t.Context(), small, []a2a.Event{small.Task}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; { // the spare has its room
		if fi, err := os.Stat(sparePath(path)); err == nil && fi.Size() == s.log.segment {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no spare segment within 10s")
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	filler := fillDisk(t, dir)
	big := walSnap("big", 1, strings.Repeat("B", 200<<10))
	if err := s.Append(t.Context(), big, []a2a.Event{big.Task}); err == nil {
		t.Fatal("a write growing a segment on a full disk succeeded")
	} else {
		t.Logf("the big write on a full disk: %v", err)
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Fatal("store ready after a log write failed for want of space")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("store not ready once space was freed: %v", err)
	}
	after := walSnap("after", 1, "a")
	if err := s.Append(t.Context(), after, []a2a.Event{after.Task}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	img := crashImage(t, path) // as a crash now would leave it
	s.Close()
	s2, err := Open(img, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for _, id := range []a2a.TaskID{"small", "after"} {
		if _, err := s2.Get(t.Context(), owner, id); err != nil {
			t.Fatalf("acknowledged task %s after the crash: %v", id, err)
		}
	}
	if _, err := s2.Get(t.Context(), owner, "big"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("the write that failed came back: %v", err)
	}
}
