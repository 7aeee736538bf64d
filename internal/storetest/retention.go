package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// BlobMarker is the metadata key under which the retention suite's tasks
// name blobs; [Blobs] is the index the store under test must be opened with.
const BlobMarker = "storetest/blob"

// Blobs is the [tasks.BlobIndex] of the retention suite's tasks: a part's
// metadata value under BlobMarker is a blob digest.
var Blobs = tasks.BlobIndex{Marker: BlobMarker, Digests: func(t *a2a.Task) []string {
	var out []string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if d, ok := p.Metadata[BlobMarker].(string); ok {
				out = append(out, d)
			}
		}
	}
	return out
}}

// RunRetention checks [tasks.Purger] on stores made by open, which must
// return an empty store opened with the index [Blobs] that also implements
// tasks.Purger. Run's rules for open apply.
func RunRetention(t *testing.T, open func(t *testing.T) tasks.Store) {
	fresh := func(t *testing.T) (tasks.Store, tasks.Purger) {
		t.Helper()
		s := open(t)
		t.Cleanup(func() { s.Close() })
		p, ok := s.(tasks.Purger)
		if !ok {
			t.Fatalf("%T does not implement tasks.Purger", s)
		}
		return s, p
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.T, tasks.Store, tasks.Purger)
	}{
		{"Expired", testExpired},
		{"Purge/Whole", testPurgeWhole},
		{"Purge/Blobs", testPurgeBlobs},
		{"Purge/Changed", testPurgeChanged},
		{"Purge/Tenants", testPurgeTenants},
		{"Stats", testStats},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, p := fresh(t)
			c.fn(t, s, p)
		})
	}
}

// day is the suite's retention window; the tasks are dated from base.
const day = 24 * time.Hour

// finished creates a task that ended in state at, with the blobs named.
func finished(t *testing.T, s tasks.Store, owner tasks.Owner, id string, state a2a.TaskState, at time.Time, blobs ...string) *tasks.Snapshot {
	t.Helper()
	first := create(t, s, owner, id, "c-"+id, a2a.TaskStateWorking, at.Add(-time.Minute))
	next := snapshot(owner, id, first.Task.ContextID, state, 2, at)
	var evs []a2a.Event
	if len(blobs) > 0 {
		art := &a2a.Artifact{ID: "a1", Name: "out"}
		for _, d := range blobs {
			p := a2a.NewTextPart("blob " + d)
			p.Metadata = map[string]any{BlobMarker: d}
			art.Parts = append(art.Parts, p)
		}
		next.Task.Artifacts = []*a2a.Artifact{art}
		next.Version = 3
		evs = append(evs, &a2a.TaskArtifactUpdateEvent{TaskID: next.Task.ID, ContextID: next.Task.ContextID, Artifact: art})
	}
	evs = append(evs, statusEvent(next))
	if err := s.Append(t.Context(), next, evs); err != nil {
		t.Fatalf("finish task %s: %v", id, err)
	}
	return next
}

func expiredIDs(t *testing.T, p tasks.Purger, r tasks.Retention, now time.Time, limit int) []string {
	t.Helper()
	got, err := p.Expired(t.Context(), r, now, limit)
	if err != nil {
		t.Fatalf("expired: %v", err)
	}
	var out []string
	for _, e := range got {
		out = append(out, string(e.ID))
	}
	return out
}

func purge(t *testing.T, p tasks.Purger, r tasks.Retention, now time.Time, ids ...string) *tasks.PurgeResult {
	t.Helper()
	tids := make([]a2a.TaskID, len(ids))
	for i, id := range ids {
		tids[i] = a2a.TaskID(id)
	}
	res, err := p.Purge(t.Context(), r, now, tids)
	if err != nil {
		t.Fatalf("purge %v: %v", ids, err)
	}
	return res
}

func purgedIDs(res *tasks.PurgeResult) []string {
	var out []string
	for _, e := range res.Tasks {
		out = append(out, string(e.ID))
	}
	slices.Sort(out)
	return out
}

// testExpired: only finished tasks past the window, oldest first, up to
// the limit; never unfinished or interrupted ones, nor with no window.
func testExpired(t *testing.T, s tasks.Store, p tasks.Purger) {
	r := tasks.Retention{Finished: day}
	now := base.Add(10 * day)
	finished(t, s, alice, "old-completed", a2a.TaskStateCompleted, base.Add(2*day))
	finished(t, s, bob, "older-failed", a2a.TaskStateFailed, base.Add(day))
	finished(t, s, alice, "old-canceled", a2a.TaskStateCanceled, base.Add(3*day))
	finished(t, s, alice, "old-rejected", a2a.TaskStateRejected, base.Add(4*day))
	finished(t, s, alice, "recent", a2a.TaskStateCompleted, now.Add(-time.Hour))
	create(t, s, alice, "old-working", "c", a2a.TaskStateWorking, base)
	finished(t, s, alice, "old-input", a2a.TaskStateInputRequired, base)
	want := []string{"older-failed", "old-completed", "old-canceled", "old-rejected"}
	if got := expiredIDs(t, p, r, now, 100); !slices.Equal(got, want) {
		t.Errorf("expired = %v, want %v", got, want)
	}
	if got := expiredIDs(t, p, r, now, 2); !slices.Equal(got, want[:2]) {
		t.Errorf("expired, limit 2 = %v, want %v", got, want[:2])
	}
	if got := expiredIDs(t, p, tasks.Retention{}, now, 100); len(got) != 0 {
		t.Errorf("expired with no window = %v, want none", got)
	}
	got, err := p.Expired(t.Context(), r, now, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("expired: %v, %v", got, err)
	}
	if e := got[0]; e.Owner != bob || e.State != a2a.TaskStateFailed || !e.Updated.Equal(base.Add(day)) {
		t.Errorf("expired[0] = %+v, want bob's failed task of %v", e, base.Add(day))
	}
}

// testPurgeWhole: a purged task is gone with its events, push configs and
// list entries; the others stay as they were.
func testPurgeWhole(t *testing.T, s tasks.Store, p tasks.Purger) {
	ctx := t.Context()
	r := tasks.Retention{Finished: day}
	now := base.Add(10 * day)
	finished(t, s, alice, "gone", a2a.TaskStateCompleted, base)
	if err := s.PutPushConfig(ctx, alice, pushConfig("gone", "h1", "https://hook/1")); err != nil {
		t.Fatal(err)
	}
	kept := finished(t, s, alice, "kept", a2a.TaskStateCompleted, now.Add(-time.Hour))
	if err := s.PutPushConfig(ctx, alice, pushConfig("kept", "h1", "https://hook/1")); err != nil {
		t.Fatal(err)
	}
	working := create(t, s, alice, "working", "c", a2a.TaskStateWorking, base)
	res := purge(t, p, r, now, "gone", "kept", "working", "no-such-task")
	if got := purgedIDs(res); !slices.Equal(got, []string{"gone"}) {
		t.Fatalf("purged %v, want [gone]", got)
	}
	if e := res.Tasks[0]; e.Owner != alice || e.State != a2a.TaskStateCompleted || !e.Updated.Equal(base) {
		t.Errorf("purged %+v", e)
	}
	_, err := s.Get(ctx, alice, "gone")
	wantErr(t, "get purged", err, tasks.ErrNotFound)
	_, err = s.OwnerOf(ctx, "gone")
	wantErr(t, "owner of purged", err, tasks.ErrNotFound)
	_, err = s.Events(ctx, alice, "gone", 0)
	wantErr(t, "events of purged", err, tasks.ErrNotFound)
	_, err = s.GetPushConfig(ctx, alice, "gone", "h1")
	wantErr(t, "push config of purged", err, tasks.ErrNotFound)
	_, err = s.ListPushConfigs(ctx, alice, "gone")
	wantErr(t, "push configs of purged", err, tasks.ErrNotFound)
	if d := deliveries(t, s, "gone"); len(d) != 0 {
		t.Errorf("push deliveries of purged: %d", len(d))
	}
	if d := deliveries(t, s, ""); len(d) != 1 || d[0].Config.TaskID != "kept" {
		t.Errorf("push deliveries of all tasks = %d, want kept's one", len(d))
	}
	page := list(t, s, tasks.ListQuery{Owner: alice})
	if got := ids(page); !slices.Equal(got, []string{"kept", "working"}) || page.TotalSize != 2 {
		t.Errorf("list = %v (total %d), want [kept working]", got, page.TotalSize)
	}
	if page := list(t, s, tasks.ListQuery{Owner: alice, State: a2a.TaskStateCompleted}); page.TotalSize != 1 {
		t.Errorf("completed tasks listed = %d, want 1", page.TotalSize)
	}
	for _, c := range []string{kept.Task.ContextID, "c"} {
		page := list(t, s, tasks.ListQuery{Owner: alice, ContextID: c})
		if got := ids(page); slices.Contains(got, "gone") || page.TotalSize != len(got) {
			t.Errorf("list of context %s = %v (total %d)", c, got, page.TotalSize)
		}
	}
	sameSnapshot(t, mustGet(t, s, alice, "kept"), kept)
	sameSnapshot(t, mustGet(t, s, alice, "working"), working)
	if evs, err := s.Events(ctx, alice, "kept", 0); err != nil || len(evs) != 2 {
		t.Errorf("events of kept: %d, %v", len(evs), err)
	}
	if got := expiredIDs(t, p, r, now, 100); len(got) != 0 {
		t.Errorf("expired after purge = %v", got)
	}
	if res := purge(t, p, r, now, "gone"); len(res.Tasks) != 0 {
		t.Errorf("second purge deleted %v", purgedIDs(res))
	}
	// The id is free again: a new task of the same id starts at version 1.
	create(t, s, bob, "gone", "c", a2a.TaskStateWorking, now)
	mustGet(t, s, bob, "gone")
}

// testPurgeBlobs: a purge reports the blobs no kept task names; a blob a
// kept task shares stays until that task goes too.
func testPurgeBlobs(t *testing.T, s tasks.Store, p tasks.Purger) {
	r := tasks.Retention{Finished: day}
	now := base.Add(10 * day)
	finished(t, s, alice, "old", a2a.TaskStateCompleted, base, "sha256:shared", "sha256:alone")
	finished(t, s, bob, "new", a2a.TaskStateCompleted, now.Add(-time.Hour), "sha256:shared")
	finished(t, s, alice, "plain", a2a.TaskStateCompleted, base)
	res := purge(t, p, r, now, "old", "plain")
	if got := purgedIDs(res); !slices.Equal(got, []string{"old", "plain"}) {
		t.Fatalf("purged %v", got)
	}
	if !slices.Equal(res.Blobs, []string{"sha256:alone"}) {
		t.Errorf("blobs freed = %v, want [sha256:alone] (sha256:shared is named by a kept task)", res.Blobs)
	}
	res = purge(t, p, r, now.Add(2*day), "new")
	if !slices.Equal(res.Blobs, []string{"sha256:shared"}) {
		t.Errorf("blobs freed with the last task naming it = %v, want [sha256:shared]", res.Blobs)
	}
}

// testPurgeChanged: a task that changed after Expired found it (written
// again, or still recent under another window) is not deleted.
func testPurgeChanged(t *testing.T, s tasks.Store, p tasks.Purger) {
	r := tasks.Retention{Finished: day}
	now := base.Add(10 * day)
	old := finished(t, s, alice, "t1", a2a.TaskStateCompleted, base)
	if got := expiredIDs(t, p, r, now, 10); !slices.Equal(got, []string{"t1"}) {
		t.Fatalf("expired = %v", got)
	}
	next := advance(t, s, old, a2a.TaskStateCompleted, now.Add(-time.Minute))
	if res := purge(t, p, r, now, "t1"); len(res.Tasks) != 0 {
		t.Errorf("purged a task written since: %v", purgedIDs(res))
	}
	sameSnapshot(t, mustGet(t, s, alice, "t1"), next)
	if res := purge(t, p, tasks.Retention{Finished: 20 * day}, now, "t1"); len(res.Tasks) != 0 {
		t.Errorf("purged a task within its window: %v", purgedIDs(res))
	}
}

// testPurgeTenants: a tenant's own window replaces the default one, and 0
// keeps its tasks forever.
func testPurgeTenants(t *testing.T, s tasks.Store, p tasks.Purger) {
	now := base.Add(10 * day)
	forever := tasks.Owner{Principal: "carol", Tenant: "archive"}
	finished(t, s, alice, "default", a2a.TaskStateCompleted, now.Add(-2*day))
	finished(t, s, aliceOther, "other", a2a.TaskStateCompleted, now.Add(-2*day))
	finished(t, s, forever, "archived", a2a.TaskStateCompleted, base)
	r := tasks.Retention{Finished: 3 * day, Tenants: map[string]time.Duration{"other": day, "archive": 0}}
	if got := expiredIDs(t, p, r, now, 10); !slices.Equal(got, []string{"other"}) {
		t.Errorf("expired = %v, want [other]", got)
	}
	res := purge(t, p, r, now, "default", "other", "archived")
	if got := purgedIDs(res); !slices.Equal(got, []string{"other"}) {
		t.Errorf("purged %v, want [other]", got)
	}
	mustGet(t, s, alice, "default")
	mustGet(t, s, forever, "archived")
	only := tasks.Retention{Tenants: map[string]time.Duration{"": day}} // the default tenant only
	if got := expiredIDs(t, p, only, now, 10); !slices.Equal(got, []string{"default"}) {
		t.Errorf("expired, default tenant only = %v, want [default]", got)
	}
}

// testStats: counts by state, the oldest task, the last purge.
func testStats(t *testing.T, s tasks.Store, p tasks.Purger) {
	ctx := t.Context()
	st, err := p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Tasks != 0 || !st.LastPurge.IsZero() || st.Purged != 0 {
		t.Errorf("empty store: %+v", st)
	}
	now := base.Add(10 * day)
	for i := range 3 {
		finished(t, s, alice, fmt.Sprintf("c%d", i), a2a.TaskStateCompleted, base.Add(time.Duration(i)*time.Hour))
	}
	finished(t, s, bob, "f", a2a.TaskStateFailed, now)
	create(t, s, bob, "w", "c", a2a.TaskStateWorking, now)
	if st, err = p.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Tasks != 5 || st.ByState[a2a.TaskStateCompleted] != 3 || st.ByState[a2a.TaskStateFailed] != 1 || st.ByState[a2a.TaskStateWorking] != 1 {
		t.Errorf("stats = %+v", st)
	}
	if st.Oldest != "c0" || !st.OldestUpdated.Equal(base) || st.Bytes <= 0 {
		t.Errorf("oldest %s at %v, bytes %d: want c0 at %v, some bytes", st.Oldest, st.OldestUpdated, st.Bytes, base)
	}
	purge(t, p, tasks.Retention{Finished: day}, now, "c0", "c1")
	purge(t, p, tasks.Retention{Finished: day}, now, "c2")
	if st, err = p.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Tasks != 2 || st.ByState[a2a.TaskStateCompleted] != 0 || st.LastPurgeCount != 1 || st.Purged != 3 || st.LastPurge.Sub(now).Abs() >= time.Millisecond {
		t.Errorf("after purges: %+v", st)
	}
}
