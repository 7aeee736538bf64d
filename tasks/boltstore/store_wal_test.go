package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// These tests drive the store's committer, log and applier through real
// writes; a write that is not an append (a push config's) holds the applier
// inside a transaction where a test needs it there.

func walSnap(id a2a.TaskID, version uint64, meta string) *tasks.Snapshot {
	task := &a2a.Task{ID: id, ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if meta != "" {
		task.Metadata = map[string]any{"k": meta}
	}
	return &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: "p"}, Version: version, Updated: time.Unix(int64(version), 0)}
}

// crashImage copies the store file and its log as they are now, as a crash
// at this moment would leave them, to a new path.
func crashImage(t *testing.T, path string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "tasks.db")
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), filepath.Base(path)); ok {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(path), e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(img+rest, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return img
}

// holdApplier queues a write that keeps the applier inside its transaction
// until release is closed; it returns once the applier is there.
func holdApplier(t *testing.T, s *Store, fn func(*bolt.Tx) error) (release chan struct{}, done *sync.WaitGroup) {
	started, release := make(chan struct{}), make(chan struct{})
	done = &sync.WaitGroup{}
	done.Go(func() {
		s.update(t.Context(), &boltWrite{fn: func(tx *bolt.Tx) error {
			close(started)
			<-release
			if fn != nil {
				return fn(tx)
			}
			return nil
		}})
	})
	<-started
	return release, done
}

// openWithTask opens a store at path holding task t1 at version 1.
func openWithTask(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first := walSnap("t1", 1, "")
	if err := s.Append(t.Context(), first, []a2a.Event{first.Task}); err != nil {
		t.Fatal(err)
	}
	return s
}

// openWithSameVersion opens a store at path holding task t1 at version 1,
// appended twice: with its first event, then with metadata k=m1 and no event.
func openWithSameVersion(t *testing.T, path string) *Store {
	t.Helper()
	s := openWithTask(t, path)
	if err := s.Append(t.Context(), walSnap("t1", 1, "m1"), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// wantMetadata fails t unless s reads t1 with metadata k=want.
func wantMetadata(t *testing.T, s *Store, want, what string) {
	t.Helper()
	got, err := s.Get(t.Context(), tasks.Owner{Principal: "p"}, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Task.Metadata["k"] != want {
		t.Fatalf("%s: metadata %v, want k=%s", what, got.Task.Metadata, want)
	}
}

// TestReplaySnapshotOnlyAppend: an append without events keeps the task's
// version; replay still applies it after one of the same version.
func TestReplaySnapshotOnlyAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s := openWithSameVersion(t, path)
	img := crashImage(t, path) // the applier waits applyEvery: both are in the log only
	s.Close()
	s2, err := Open(img, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	wantMetadata(t, s2, "m1", "snapshot-only append after replay")
}

// TestReadsKeepLaterAppendOfSameVersion: applying an append does not make
// reads forget a later one of the same version still waiting in the queue.
func TestReadsKeepLaterAppendOfSameVersion(t *testing.T) {
	s := openWithSameVersion(t, filepath.Join(t.TempDir(), "tasks.db"))
	defer s.Close()
	release, done := holdApplier(t, s, nil) // applying the two appends
	if err := s.Append(t.Context(), walSnap("t1", 1, "m2"), nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	done.Wait()
	wantMetadata(t, s, "m2", "read after the acknowledged m2")
}

// TestApplyFailureKeepsLog: when bbolt refuses to apply an append, the
// store stops applying, fails what follows, and keeps every acknowledged
// record in its log.
func TestApplyFailureKeepsLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.log.segment = 64 << 10 // many segments, for release to be tempted
	// bbolt gets a version of a0 the committer does not know: applying a0's
	// first append then fails, as a disk error would.
	release, done := holdApplier(t, s, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHeads).Put([]byte("a0"), encodeHead(9, time.Unix(9, 0), record.OwnerKey(tasks.Owner{Principal: "p"})))
	})
	acked := map[a2a.TaskID]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 6000; i += 16 {
				sn := walSnap(a2a.TaskID(fmt.Sprintf("a%d", i)), 1, "")
				if err := s.Append(t.Context(), sn, []a2a.Event{sn.Task}); err == nil {
					mu.Lock()
					acked[sn.Task.ID] = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(release)
	done.Wait()
	if _, err := s.Events(t.Context(), tasks.Owner{Principal: "p"}, "a5999", 0); err == nil {
		t.Fatal("a read that needs an append bbolt could not apply succeeded")
	}
	sn := walSnap("late", 1, "")
	if err := s.Append(t.Context(), sn, []a2a.Event{sn.Task}); err == nil {
		t.Fatal("an append after the store broke succeeded")
	}
	if err := s.Ping(t.Context()); err == nil {
		t.Fatal("a broken store answers its readiness check")
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close of a broken store reported nothing")
	}
	recs, _, _, err := readWAL(path)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[a2a.TaskID]bool{}
	for _, r := range recs {
		logged[r.id] = true
	}
	for id := range acked {
		if !logged[id] {
			t.Fatalf("acknowledged %s is gone from the log (%d of %d acknowledged appends logged)", id, len(logged), len(acked))
		}
	}
	if len(acked) < 4096 {
		t.Fatalf("only %d appends acknowledged before the store broke: the test did not span batches", len(acked))
	}
}

// TestLogUnderPatternPath: a store whose path holds glob characters finds
// its log.
func TestLogUnderPatternPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x[1]*?")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tasks.db")
	s := openWithTask(t, path)
	img := filepath.Join(dir, "crash.db")
	for _, n := range []string{"", ".wal-0000000000000001"} {
		b, err := os.ReadFile(path + n)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(img+n, b, 0o600)
	}
	s.Close()
	s2, err := Open(img, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Get(t.Context(), tasks.Owner{Principal: "p"}, "t1"); err != nil {
		t.Fatalf("the logged append after reopen: %v", err)
	}
}

// TestAppendOverKeyLimit: an append bbolt could not store is refused before
// it is logged, and the store goes on.
func TestAppendOverKeyLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	huge := walSnap("t1", 1, "")
	huge.Owner.Tenant = strings.Repeat("x", bolt.MaxKeySize)
	if err := s.Append(t.Context(), huge, []a2a.Event{huge.Task}); err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("append with a %d-byte tenant: %v", len(huge.Owner.Tenant), err)
	}
	ok := walSnap("t2", 1, "")
	if err := s.Append(t.Context(), ok, []a2a.Event{ok.Task}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(t.Context(), ok.Owner, "t2", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestCheckAgainstStoredHeads: appends that share a committer batch and
// name tasks bbolt holds (none waiting for the applier) are checked against
// the heads one read transaction fetched: the next version passes, a stale
// one and another owner's are refused, a new task is taken, and a second
// append to a task in the same batch follows the first.
func TestCheckAgainstStoredHeads(t *testing.T) {
	s := openWithTask(t, filepath.Join(t.TempDir(), "tasks.db"))
	defer s.Close()
	t2 := walSnap("t2", 1, "")
	if err := s.Append(t.Context(), t2, []a2a.Event{t2.Task}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Events(t.Context(), tasks.Owner{Principal: "p"}, "t1", 0); err != nil { // waits for the applier
		t.Fatal(err)
	}
	s.amu.Lock()
	pending := len(s.heads)
	s.amu.Unlock()
	if pending != 0 {
		t.Fatalf("%d tasks still wait for the applier", pending)
	}
	appendOf := func(snap *tasks.Snapshot, events int) *boltWrite {
		a := &walAppend{id: snap.Task.ID, version: snap.Version, events: uint64(events), owner: record.OwnerKey(snap.Owner), rec: []byte("{}")}
		return &boltWrite{app: a, res: make(chan error, 1)}
	}
	other := walSnap("t2", 2, "")
	other.Owner = tasks.Owner{Principal: "q"}
	batch := []*boltWrite{
		appendOf(walSnap("t1", 2, ""), 1), // next version
		appendOf(walSnap("t1", 3, ""), 1), // after the one before it in this batch
		appendOf(walSnap("t2", 3, ""), 1), // skips a version
		appendOf(other, 1),                // another owner's
		appendOf(walSnap("t3", 1, ""), 1), // new
		appendOf(walSnap("t4", 2, ""), 1), // new, not at 1
	}
	want := []error{nil, nil, tasks.ErrConflict, tasks.ErrNotFound, nil, tasks.ErrConflict}
	if stored := s.storedHeads(batch); len(stored) != 4 || stored["t1"] == nil || stored["t3"] != nil {
		t.Fatalf("one read fetched %v, want t1 and t2 held, t3 and t4 absent", stored)
	}
	s.commit(slices.Clone(batch), nil) // commit reuses the batch's array
	for i, w := range batch {
		if err := <-w.res; !errors.Is(err, want[i]) || (want[i] == nil) != (err == nil) {
			t.Errorf("append %d: %v, want %v", i, err, want[i])
		}
	}
}
