package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// recoverDry runs a dry recovery and checks it changed nothing: the store
// still refuses to open.
func recoverDry(t *testing.T, path string) *Recovery {
	t.Helper()
	r, err := Recover(path, time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Written {
		t.Fatal("a dry run says it wrote")
	}
	if s, err := Open(path, time.Second); err == nil {
		s.Close()
		t.Fatal("the store opens after a dry run: it changed something")
	}
	return r
}

// recoverApply recovers for real and wants the store to open after.
func recoverApply(t *testing.T, path string, want *Recovery) {
	t.Helper()
	r, err := Recover(path, time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Written {
		t.Fatal("recovery did not write")
	}
	r.Written = false
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("recovery found\n%+v\nbut the dry run\n%+v", r, want)
	}
	if segs := segments(t, path); len(segs) != 0 {
		t.Fatalf("log left after recovery: %v", segs)
	}
}

// TestRecoverFlippedByte: a flipped byte in one task's record. The dry run
// names that task (its damaged record still decodes) and the record; the
// recovery applies every other record, and the store opens without it.
func TestRecoverFlippedByte(t *testing.T) {
	img := crashedStore(t, 5, 0)
	segs := segments(t, img)
	last := segs[len(segs)-1]
	flipByte(t, last, markerOffset(t, last, 2)+20)
	r := recoverDry(t, img)
	if want := []RecoveredTask{{ID: "d002", LastGood: 0, Lost: []uint64{1}}}; !reflect.DeepEqual(r.Tasks, want) {
		t.Fatalf("tasks lost %+v, want %+v", r.Tasks, want)
	}
	if len(r.Damage) != 1 || r.Damage[0].File != last || r.Damage[0].Torn || r.Damage[0].Missing || r.Damage[0].From != r.Applied+3 || r.Damage[0].To != r.Applied+3 {
		t.Fatalf("damage %+v (store at %d), want one record in %s", r.Damage, r.Applied, last)
	}
	if r.Replay != 4 {
		t.Fatalf("%d records to replay, want 4", r.Replay)
	}
	recoverApply(t, img, r)
	s, err := Open(img, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owner := tasks.Owner{Principal: "p"}
	for _, id := range []a2a.TaskID{"applied", "d000", "d001", "d003", "d004"} {
		if _, err := s.Get(t.Context(), owner, id); err != nil {
			t.Fatalf("task %s after recovery: %v", id, err)
		}
	}
	if _, err := s.Get(t.Context(), owner, "d002"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("task d002, whose record was damaged: %v", err)
	}
	next := walSnap("after", 1, "")
	if err := s.Append(t.Context(), next, []a2a.Event{next.Task}); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
}

// TestRecoverChain: a task's middle version is damaged; its later version
// cannot follow, so the task keeps its first version and loses the other
// two, while another task's records all apply.
func TestRecoverChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	release, done := holdApplier(t, s, nil)
	for v := uint64(1); v <= 3; v++ {
		for _, id := range []a2a.TaskID{"x", "y"} {
			snap := walSnap(id, v, fmt.Sprintf("%s-version-%d", id, v))
			if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
				t.Fatal(err)
			}
		}
	}
	img := crashImage(t, path)
	close(release)
	done.Wait()
	s.Close()
	seg := segments(t, img)[0]
	b, _ := os.ReadFile(seg)
	flipByte(t, seg, indexOf(t, b, "x-version-2"))
	r := recoverDry(t, img)
	if want := []RecoveredTask{{ID: "x", LastGood: 1, Lost: []uint64{2, 3}}}; !reflect.DeepEqual(r.Tasks, want) {
		t.Fatalf("tasks lost %+v, want %+v", r.Tasks, want)
	}
	recoverApply(t, img, r)
	s, err = Open(img, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, v := range map[a2a.TaskID]uint64{"x": 1, "y": 3} {
		got, err := s.Get(t.Context(), tasks.Owner{Principal: "p"}, id)
		if err != nil || got.Version != v {
			t.Fatalf("task %s after recovery: %v, %v; want version %d", id, got, err, v)
		}
	}
}

func indexOf(t *testing.T, b []byte, s string) int {
	t.Helper()
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	t.Fatalf("%q not found", s)
	return 0
}

// TestRecoverMissingSegment: the oldest of several segments is deleted.
// The records it held cannot be named; recovery reports the gap, applies
// the rest, and the store opens.
func TestRecoverMissingSegment(t *testing.T) {
	img := crashedStore(t, 40, 4096)
	segs := segments(t, img)
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	r := recoverDry(t, img)
	if len(r.Damage) != 1 || !r.Damage[0].Missing || r.Damage[0].From != r.Applied+1 || r.Damage[0].File != segs[1] {
		t.Fatalf("damage %+v, want the records before %s missing", r.Damage, segs[1])
	}
	recoverApply(t, img, r)
	s, err := Open(img, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestRecoverWholeLog: a log without damage recovers losslessly: the same
// as opening.
func TestRecoverWholeLog(t *testing.T) {
	img := crashedStore(t, 3, 0)
	r, err := Recover(img, time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Lossless() || r.Replay != 3 {
		t.Fatalf("recovery of a whole log: %+v", r)
	}
	recoverApply(t, img, r)
	wantTasks(t, img, 3)
}
