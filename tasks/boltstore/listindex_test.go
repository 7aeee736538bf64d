package boltstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
)

// dumpBuckets returns the keys and values of the named buckets.
func dumpBuckets(tx *bolt.Tx, names ...[]byte) string {
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "%s:\n", n)
		tx.Bucket(n).ForEach(func(k, v []byte) error {
			fmt.Fprintf(&b, "  %q = %q\n", k, v)
			return nil
		})
	}
	return b.String()
}

// checkListIndexes checks that the list indexes and counts are what
// indexLists builds from by_owner.
func checkListIndexes(t *testing.T, db *bolt.DB) {
	t.Helper()
	err := db.Update(func(tx *bolt.Tx) error {
		got := dumpBuckets(tx, bucketByState, bucketByContext, bucketCounts)
		for _, n := range [][]byte{bucketByState, bucketByContext, bucketCounts} {
			if err := tx.DeleteBucket(n); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(n); err != nil {
				return err
			}
		}
		if err := indexLists(tx); err != nil {
			return err
		}
		if want := dumpBuckets(tx, bucketByState, bucketByContext, bucketCounts); got != want {
			t.Errorf("list indexes:\n%s\nrebuilt from by_owner:\n%s", got, want)
		}
		return errRetryBatch // leave the file as it was
	})
	if err != errRetryBatch {
		t.Fatal(err)
	}
}

// TestListIndexesFollow runs random state changes, new tasks and purges
// over two owners and a few contexts, and checks the list indexes and
// counts against by_owner after each round and after reopening.
func TestListIndexesFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	owners := []tasks.Owner{{Principal: "a"}, {Principal: "a", Tenant: "t"}}
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateCompleted, a2a.TaskStateFailed}
	snaps := map[a2a.TaskID]*tasks.Snapshot{}
	now := time.Now() // status updates carry the time they were made
	for round := range 5 {
		for i := range 40 {
			now = now.Add(time.Second)
			id := a2a.TaskID("t" + strconv.Itoa(rng.IntN(60)))
			prev := snaps[id]
			var ev a2a.Event
			var next *tasks.Snapshot
			switch {
			case prev == nil:
				task := &a2a.Task{ID: id, ContextID: "c" + strconv.Itoa(rng.IntN(3)), Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
				ev = task
				if next, err = tasks.Apply(nil, task, now); err != nil {
					t.Fatal(err)
				}
				next.Owner = owners[i%2]
			case prev.Task.Status.State.Terminal():
				continue
			default:
				ev = a2a.NewStatusUpdateEvent(prev.Task, states[rng.IntN(len(states))], nil)
				if next, err = tasks.Apply(prev, ev, now); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
				t.Fatal(err)
			}
			snaps[id] = next
		}
		if _, err := s.Stats(ctx); err != nil { // waits for bbolt: a purge leaves tasks with writes in flight
			t.Fatal(err)
		}
		var ids []a2a.TaskID
		for id, snap := range snaps {
			if snap.Task.Status.State.Terminal() && rng.IntN(2) == 0 {
				ids = append(ids, id)
			}
		}
		res, err := s.Purge(ctx, tasks.Retention{Finished: time.Nanosecond}, time.Now().Add(time.Hour), ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tasks) != len(ids) {
			t.Fatalf("round %d: purged %d of %d", round, len(res.Tasks), len(ids))
		}
		for _, e := range res.Tasks {
			delete(snaps, e.ID)
		}
		checkListIndexes(t, s.db)
		for _, o := range owners {
			for _, st := range states {
				want := 0
				for _, snap := range snaps {
					if snap.Owner == o && snap.Task.Status.State == st {
						want++
					}
				}
				page, err := s.List(ctx, tasks.ListQuery{Owner: o, State: st, PageSize: 2})
				if err != nil || page.TotalSize != want {
					t.Fatalf("round %d: %v %s: total %d, want %d (%v)", round, o, st, page.TotalSize, want, err)
				}
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, time.Second); err != nil {
		t.Fatal(err)
	}
	checkListIndexes(t, s.db)
}
