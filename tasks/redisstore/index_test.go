package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// TestRedisListIndexes: List by state and by context counts and pages
// through its own index, which follows state changes and purges; and
// listing by state reads a page, not the owner's whole index.
func TestRedisListIndexes(t *testing.T) {
	ctx := t.Context()
	url := redistest.ServerURL(t)
	keep := tasks.Retention{Finished: time.Hour}
	s, _ := redistest.OpenStore(t, url, redisstore.WithRetention(keep))
	alice := tasks.Owner{Principal: "alice"}
	base := time.Now()
	snaps := map[string]*tasks.Snapshot{}
	for i := range 30 {
		id := fmt.Sprintf("t%02d", i)
		snap := newTask(alice, id, a2a.TaskStateWorking, 1)
		snap.Task.ContextID = fmt.Sprintf("c%d", i%3)
		snap.Updated = base.Add(time.Duration(i) * time.Millisecond)
		if err := s.Append(ctx, snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
		snaps[id] = snap
	}
	// Every third task completes.
	for i := 0; i < 30; i += 3 {
		id := fmt.Sprintf("t%02d", i)
		prev := snaps[id]
		ev := a2a.NewStatusUpdateEvent(prev.Task, a2a.TaskStateCompleted, nil)
		next, err := tasks.Apply(prev, ev, base.Add(time.Second+time.Duration(i)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
			t.Fatal(err)
		}
		snaps[id] = next
	}
	count := func(q tasks.ListQuery) (total int, ids []a2a.TaskID) {
		t.Helper()
		q.Owner, q.PageSize = alice, 4
		for {
			page, err := s.List(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			total = page.TotalSize
			for _, p := range page.Tasks {
				ids = append(ids, p.Task.ID)
			}
			if page.NextPageToken == "" {
				return total, ids
			}
			q.PageToken = page.NextPageToken
		}
	}
	for _, c := range []struct {
		q    tasks.ListQuery
		want int
	}{
		{tasks.ListQuery{}, 30},
		{tasks.ListQuery{State: a2a.TaskStateCompleted}, 10},
		{tasks.ListQuery{State: a2a.TaskStateWorking}, 20},
		{tasks.ListQuery{ContextID: "c0"}, 10},
		{tasks.ListQuery{ContextID: "c0", State: a2a.TaskStateCompleted}, 10}, // i%3 == 0: c0 and completed
		{tasks.ListQuery{ContextID: "c1", State: a2a.TaskStateCompleted}, 0},
	} {
		total, ids := count(c.q)
		if total != c.want || len(ids) != c.want {
			t.Errorf("List %+v: total %d, %d tasks over its pages; want %d", c.q, total, len(ids), c.want)
		}
		seen := map[a2a.TaskID]bool{}
		for i, id := range ids {
			if seen[id] {
				t.Errorf("List %+v: %s on two pages", c.q, id)
			}
			seen[id] = true
			if c.q.State != "" && snaps[string(id)].Task.Status.State != c.q.State {
				t.Errorf("List %+v: %s is %s", c.q, id, snaps[string(id)].Task.Status.State)
			}
			if i > 0 && snaps[string(id)].Updated.After(snaps[string(ids[i-1])].Updated) {
				t.Errorf("List %+v: %s after %s but newer", c.q, id, ids[i-1])
			}
		}
	}
	// Purge the completed ones: they leave every index.
	var done []a2a.TaskID
	for i := 0; i < 30; i += 3 {
		done = append(done, a2a.TaskID(fmt.Sprintf("t%02d", i)))
	}
	res, err := s.Purge(ctx, keep, time.Now().Add(2*time.Hour), done)
	if err != nil || len(res.Tasks) != 10 {
		t.Fatalf("purge: %+v, %v", res, err)
	}
	if total, _ := count(tasks.ListQuery{State: a2a.TaskStateCompleted}); total != 0 {
		t.Errorf("completed after the purge: %d", total)
	}
	if total, _ := count(tasks.ListQuery{ContextID: "c0"}); total != 0 {
		t.Errorf("context c0 after the purge: %d", total)
	}
	if total, _ := count(tasks.ListQuery{ContextID: "c1"}); total != 10 {
		t.Errorf("context c1 after the purge: %d, want 10", total)
	}
}

// TestRedisListIndexesBuilt: a namespace written before the state and
// context indexes (none of their keys, no marker) gets them at Open.
func TestRedisListIndexesBuilt(t *testing.T) {
	ctx := t.Context()
	url := redistest.ServerURL(t)
	s, prefix := redistest.OpenStore(t, url)
	rdb := redistest.ClientFor(t, url)
	alice := tasks.Owner{Principal: "alice", Tenant: "t"}
	for i, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateCompleted} {
		snap := newTask(alice, fmt.Sprintf("t%d", i), st, 1)
		if err := s.Append(ctx, snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
	}
	// What the layout before them held: drop the indexes and the marker.
	for _, pattern := range []string{prefix + "state:*", prefix + "context:*", prefix + "indexes"} {
		for _, k := range rdb.Keys(ctx, pattern).Val() {
			rdb.Del(ctx, k)
		}
	}
	ns := prefix[len("handoff:{") : len(prefix)-2]
	again, err := redisstore.Open(ctx, url, ns)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	page, err := again.List(ctx, tasks.ListQuery{Owner: alice, State: a2a.TaskStateCompleted})
	if err != nil || page.TotalSize != 2 || len(page.Tasks) != 2 {
		t.Fatalf("List by state after Open built the indexes: %+v, %v", page, err)
	}
	page, err = again.List(ctx, tasks.ListQuery{Owner: alice, ContextID: "c"})
	if err != nil || page.TotalSize != 3 {
		t.Fatalf("List by context after Open built the indexes: %+v, %v", page, err)
	}
}
