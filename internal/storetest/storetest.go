package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// Corrupter is implemented by a store under test that can damage its own
// records; the suite's "Corrupt" subtests run only on such stores.
type Corrupter interface {
	// CorruptTask replaces the stored snapshot of task id with bytes that do
	// not decode.
	CorruptTask(t *testing.T, id a2a.TaskID)
	// CorruptEvent replaces the stored event seq of task id likewise.
	CorruptEvent(t *testing.T, id a2a.TaskID, seq uint64)
	// CorruptPushConfig replaces the stored push config id of task likewise.
	CorruptPushConfig(t *testing.T, task a2a.TaskID, id string)
}

// Run checks every method and every error of [tasks.Store] on stores made by
// open. open is called once per subtest and must return an empty store; Run
// closes it at the end of the subtest (Close must be idempotent), and open
// releases everything else with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) tasks.Store) {
	fresh := func(t *testing.T) tasks.Store {
		t.Helper()
		s := open(t)
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.T, tasks.Store)
	}{
		{"Append/NewTask", testAppendNew},
		{"Append/Conflict", testAppendConflict},
		{"Append/SnapshotOnly", testAppendSnapshotOnly},
		{"Append/OtherOwner", testAppendOtherOwner},
		{"Append/NoTaskID", testAppendNoID},
		{"Get/NotFound", testGetNotFound},
		{"OwnerOf", testOwnerOf},
		{"Events", testEvents},
		{"List/NewestFirst", testListOrder},
		{"List/Pages", testListPages},
		{"List/DefaultPageSize", testListDefaultPageSize},
		{"List/Filters", testListFilters},
		{"List/Owners", testListOwners},
		{"List/UpdateMovesTask", testListUpdate},
		{"List/InvalidPageToken", testListBadToken},
		{"List/HistoryAndArtifacts", testListShown},
		{"Unfinished", testUnfinished},
		{"Pieces/LongHistory", testLongHistory},
		{"Pieces/ArtifactChunks", testArtifactChunks},
		{"Pieces/ReplaceAfterAppend", testReplaceAfterAppend},
		{"PushConfig/PutGetListDelete", testPushCRUD},
		{"PushConfig/NotFound", testPushNotFound},
		{"PushDelivery/State", testPushState},
		{"PushDelivery/AllTasks", testPushAll},
		{"PushDelivery/UpdateDeleted", testPushUpdateDeleted},
		{"Corrupt", testCorrupt},
		{"Closed", testClosed},
		{"Concurrent", testConcurrent},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, fresh(t)) })
	}
}

var (
	alice      = tasks.Owner{Principal: "alice"}
	aliceOther = tasks.Owner{Principal: "alice", Tenant: "other"}
	bob        = tasks.Owner{Principal: "bob"}
	// base has nanoseconds: stores must keep them, in snapshots and in order.
	base = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

// snapshot builds the task as it stands at version, updated at.
func snapshot(owner tasks.Owner, id, contextID string, state a2a.TaskState, version uint64, at time.Time) *tasks.Snapshot {
	return &tasks.Snapshot{
		Task: &a2a.Task{ID: a2a.TaskID(id), ContextID: contextID, Status: a2a.TaskStatus{State: state},
			History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("v"+fmt.Sprint(version)))}},
		Owner: owner, Version: version, Updated: at,
	}
}

func statusEvent(s *tasks.Snapshot) a2a.Event {
	return a2a.NewStatusUpdateEvent(s.Task, s.Task.Status.State, nil)
}

// create stores a new task at version 1.
func create(t *testing.T, s tasks.Store, owner tasks.Owner, id, contextID string, state a2a.TaskState, at time.Time) *tasks.Snapshot {
	t.Helper()
	snap := snapshot(owner, id, contextID, state, 1, at)
	if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
		t.Fatalf("create task %s: %v", id, err)
	}
	return snap
}

// advance moves a stored task to state with one status event.
func advance(t *testing.T, s tasks.Store, prev *tasks.Snapshot, state a2a.TaskState, at time.Time) *tasks.Snapshot {
	t.Helper()
	next := snapshot(prev.Owner, string(prev.Task.ID), prev.Task.ContextID, state, prev.Version+1, at)
	if err := s.Append(t.Context(), next, []a2a.Event{statusEvent(next)}); err != nil {
		t.Fatalf("advance task %s to %s: %v", prev.Task.ID, state, err)
	}
	return next
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameSnapshot(t *testing.T, got, want *tasks.Snapshot) {
	t.Helper()
	if got.Owner != want.Owner || got.Version != want.Version || !got.Updated.Equal(want.Updated) {
		t.Errorf("snapshot = %+v v%d %v, want %+v v%d %v", got.Owner, got.Version, got.Updated, want.Owner, want.Version, want.Updated)
	}
	if g, w := asJSON(t, got.Task), asJSON(t, want.Task); g != w {
		t.Errorf("task = %s\nwant %s", g, w)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: err = %v, want %v", what, err, want)
	}
}

func mustGet(t *testing.T, s tasks.Store, owner tasks.Owner, id string) *tasks.Snapshot {
	t.Helper()
	got, err := s.Get(t.Context(), owner, a2a.TaskID(id))
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return got
}

func testAppendNew(t *testing.T, s tasks.Store) {
	want := create(t, s, alice, "t1", "c1", a2a.TaskStateSubmitted, base)
	sameSnapshot(t, mustGet(t, s, alice, "t1"), want)
	next := advance(t, s, want, a2a.TaskStateWorking, base.Add(time.Second))
	sameSnapshot(t, mustGet(t, s, alice, "t1"), next)
}

func testAppendConflict(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	v1 := create(t, s, alice, "t1", "c1", a2a.TaskStateSubmitted, base)
	for _, c := range []struct {
		name   string
		snap   *tasks.Snapshot
		events int
	}{
		{"same version again", snapshot(alice, "t1", "c1", a2a.TaskStateWorking, 1, base.Add(time.Second)), 1},
		{"skips a version", snapshot(alice, "t1", "c1", a2a.TaskStateWorking, 4, base.Add(time.Second)), 2},
		{"too few events", snapshot(alice, "t1", "c1", a2a.TaskStateWorking, 3, base.Add(time.Second)), 1},
		{"stale snapshot-only write", snapshot(alice, "t1", "c1", a2a.TaskStateWorking, 0, base.Add(time.Second)), 0},
		{"new task not at 1", snapshot(alice, "t2", "c1", a2a.TaskStateWorking, 2, base), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			events := make([]a2a.Event, c.events)
			for i := range events {
				events[i] = statusEvent(c.snap)
			}
			wantErr(t, "append", s.Append(ctx, c.snap, events), tasks.ErrConflict)
		})
	}
	sameSnapshot(t, mustGet(t, s, alice, "t1"), v1)
	if evs, err := s.Events(ctx, alice, "t1", 0); err != nil || len(evs) != 1 {
		t.Errorf("events after conflicts = %d, %v; want 1", len(evs), err)
	}
	_, err := s.Get(ctx, alice, "t2")
	wantErr(t, "get task refused at creation", err, tasks.ErrNotFound)
}

// testAppendSnapshotOnly replaces the snapshot without events: the version
// stays, as the engine does for changes that are not events.
func testAppendSnapshotOnly(t *testing.T, s tasks.Store) {
	create(t, s, alice, "t1", "c1", a2a.TaskStateSubmitted, base)
	same := snapshot(alice, "t1", "c1", a2a.TaskStateSubmitted, 1, base.Add(time.Second))
	same.Task.Metadata = map[string]any{"k": "v"}
	if err := s.Append(t.Context(), same, nil); err != nil {
		t.Fatal(err)
	}
	sameSnapshot(t, mustGet(t, s, alice, "t1"), same)
	if evs, _ := s.Events(t.Context(), alice, "t1", 0); len(evs) != 1 {
		t.Errorf("%d events, want 1", len(evs))
	}
	page, err := s.List(t.Context(), tasks.ListQuery{Owner: alice})
	if err != nil || page.TotalSize != 1 || !page.Tasks[0].Updated.Equal(same.Updated) {
		t.Errorf("list after snapshot-only write = %+v, %v", page, err)
	}
}

func testAppendOtherOwner(t *testing.T, s tasks.Store) {
	v1 := create(t, s, alice, "t1", "c1", a2a.TaskStateSubmitted, base)
	for _, o := range []tasks.Owner{bob, aliceOther} {
		next := snapshot(o, "t1", "c1", a2a.TaskStateWorking, 2, base.Add(time.Second))
		wantErr(t, "append as "+o.Principal+"/"+o.Tenant, s.Append(t.Context(), next, []a2a.Event{statusEvent(next)}), tasks.ErrNotFound)
	}
	sameSnapshot(t, mustGet(t, s, alice, "t1"), v1)
}

func testAppendNoID(t *testing.T, s tasks.Store) {
	for name, snap := range map[string]*tasks.Snapshot{
		"nil snapshot": nil,
		"nil task":     {Owner: alice, Version: 1},
		"empty id":     snapshot(alice, "", "c1", a2a.TaskStateSubmitted, 1, base),
	} {
		if err := s.Append(t.Context(), snap, nil); err == nil {
			t.Errorf("%s: append succeeded", name)
		}
	}
}

func testGetNotFound(t *testing.T, s tasks.Store) {
	create(t, s, alice, "t1", "c1", a2a.TaskStateSubmitted, base)
	for name, c := range map[string]struct {
		owner tasks.Owner
		id    a2a.TaskID
	}{
		"missing":      {alice, "nope"},
		"other owner":  {bob, "t1"},
		"other tenant": {aliceOther, "t1"},
	} {
		_, err := s.Get(t.Context(), c.owner, c.id)
		wantErr(t, name, err, tasks.ErrNotFound)
	}
}

func testOwnerOf(t *testing.T, s tasks.Store) {
	create(t, s, aliceOther, "t1", "c1", a2a.TaskStateInputRequired, base)
	got, err := s.OwnerOf(t.Context(), "t1")
	if err != nil || got != aliceOther {
		t.Fatalf("OwnerOf: %+v %v, want %+v", got, err, aliceOther)
	}
	_, err = s.OwnerOf(t.Context(), "nope")
	wantErr(t, "OwnerOf missing", err, tasks.ErrNotFound)
}

func testEvents(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	v1 := create(t, s, alice, "t1", "c1", a2a.TaskStateSubmitted, base)
	v3 := snapshot(alice, "t1", "c1", a2a.TaskStateCompleted, 3, base.Add(time.Second))
	artifact, status := a2a.NewArtifactEvent(v3.Task, a2a.NewTextPart("result")), statusEvent(v3)
	if err := s.Append(ctx, v3, []a2a.Event{artifact, status}); err != nil {
		t.Fatal(err)
	}
	want := []a2a.Event{v1.Task, artifact, status}
	for after := uint64(0); after <= 4; after++ {
		got, err := s.Events(ctx, alice, "t1", after)
		if err != nil {
			t.Fatalf("events after %d: %v", after, err)
		}
		var rest []a2a.Event
		if after < 3 {
			rest = want[after:]
		}
		if len(got) != len(rest) {
			t.Fatalf("events after %d: %d, want %d", after, len(got), len(rest))
		}
		for i, ev := range got {
			if ev.Seq != after+uint64(i)+1 {
				t.Errorf("events after %d: seq %d at %d", after, ev.Seq, i)
			}
			g, w := asJSON(t, a2a.StreamResponse{Event: ev.Event}), asJSON(t, a2a.StreamResponse{Event: rest[i]})
			if g != w {
				t.Errorf("event %d = %s\nwant %s", ev.Seq, g, w)
			}
		}
	}
	for name, c := range map[string]struct {
		owner tasks.Owner
		id    a2a.TaskID
	}{"missing": {alice, "nope"}, "other owner": {bob, "t1"}, "other tenant": {aliceOther, "t1"}} {
		_, err := s.Events(ctx, c.owner, c.id, 0)
		wantErr(t, name, err, tasks.ErrNotFound)
	}
}

func ids(page *tasks.ListPage) []string {
	var out []string
	for _, s := range page.Tasks {
		out = append(out, string(s.Task.ID))
	}
	return out
}

func list(t *testing.T, s tasks.Store, q tasks.ListQuery) *tasks.ListPage {
	t.Helper()
	page, err := s.List(t.Context(), q)
	if err != nil {
		t.Fatalf("list %+v: %v", q, err)
	}
	return page
}

// testListOrder wants newest first, to the nanosecond, and tasks updated at
// the same instant ordered by id.
func testListOrder(t *testing.T, s tasks.Store) {
	create(t, s, alice, "b", "c", a2a.TaskStateSubmitted, base)
	create(t, s, alice, "a", "c", a2a.TaskStateSubmitted, base)
	create(t, s, alice, "old", "c", a2a.TaskStateSubmitted, base.Add(-time.Nanosecond))
	create(t, s, alice, "new", "c", a2a.TaskStateSubmitted, base.Add(time.Nanosecond))
	page := list(t, s, tasks.ListQuery{Owner: alice, PageSize: 10})
	if got, want := ids(page), []string{"new", "a", "b", "old"}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if page.TotalSize != 4 || page.NextPageToken != "" {
		t.Errorf("total %d, next %q", page.TotalSize, page.NextPageToken)
	}
	sameSnapshot(t, page.Tasks[0], mustGet(t, s, alice, "new"))
}

func testListPages(t *testing.T, s tasks.Store) {
	var want []string
	for i := 6; i >= 0; i-- { // created oldest first, listed newest first
		id := fmt.Sprintf("t%d", i)
		create(t, s, alice, id, "c", a2a.TaskStateSubmitted, base.Add(time.Duration(i)*time.Millisecond))
	}
	for i := 6; i >= 0; i-- {
		want = append(want, fmt.Sprintf("t%d", i))
	}
	var got []string
	q := tasks.ListQuery{Owner: alice, PageSize: 3}
	for pages := 1; ; pages++ {
		page := list(t, s, q)
		if page.TotalSize != 7 {
			t.Errorf("page %d: total %d, want 7", pages, page.TotalSize)
		}
		got = append(got, ids(page)...)
		if page.NextPageToken == "" {
			if pages != 3 {
				t.Errorf("%d pages, want 3", pages)
			}
			break
		}
		if pages == 3 {
			t.Fatal("a token after the last page")
		}
		q.PageToken = page.NextPageToken
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages = %v, want %v", got, want)
	}
	// A page that ends exactly at the last task has no next token.
	if page := list(t, s, tasks.ListQuery{Owner: alice, PageSize: 7}); page.NextPageToken != "" || len(page.Tasks) != 7 {
		t.Errorf("full page: %d tasks, next %q", len(page.Tasks), page.NextPageToken)
	}
}

func testListDefaultPageSize(t *testing.T, s tasks.Store) {
	for i := range 51 {
		create(t, s, alice, fmt.Sprintf("t%02d", i), "c", a2a.TaskStateSubmitted, base.Add(time.Duration(i)))
	}
	page := list(t, s, tasks.ListQuery{Owner: alice})
	if len(page.Tasks) != 50 || page.TotalSize != 51 || page.NextPageToken == "" {
		t.Fatalf("default page: %d tasks of %d, next %q", len(page.Tasks), page.TotalSize, page.NextPageToken)
	}
	rest := list(t, s, tasks.ListQuery{Owner: alice, PageToken: page.NextPageToken})
	if got := ids(rest); !slices.Equal(got, []string{"t00"}) {
		t.Errorf("second page = %v", got)
	}
}

func testListFilters(t *testing.T, s tasks.Store) {
	create(t, s, alice, "w1", "c1", a2a.TaskStateWorking, base)
	create(t, s, alice, "w2", "c2", a2a.TaskStateWorking, base.Add(time.Nanosecond))
	create(t, s, alice, "d1", "c1", a2a.TaskStateCompleted, base.Add(2*time.Nanosecond))
	create(t, s, alice, "s1", "c1", a2a.TaskStateSubmitted, base.Add(-time.Second))
	after := base
	for _, c := range []struct {
		name string
		q    tasks.ListQuery
		want []string
	}{
		{"state", tasks.ListQuery{State: a2a.TaskStateWorking}, []string{"w2", "w1"}},
		{"context", tasks.ListQuery{ContextID: "c1"}, []string{"d1", "w1", "s1"}},
		{"state and context", tasks.ListQuery{State: a2a.TaskStateWorking, ContextID: "c1"}, []string{"w1"}},
		{"updated strictly after", tasks.ListQuery{UpdatedAfter: &after}, []string{"d1", "w2"}},
		{"all three", tasks.ListQuery{UpdatedAfter: &after, ContextID: "c1", State: a2a.TaskStateCompleted}, []string{"d1"}},
		{"nothing matches", tasks.ListQuery{ContextID: "c9"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.q.Owner, c.q.PageSize = alice, 1
			var got []string
			for {
				page := list(t, s, c.q)
				if page.TotalSize != len(c.want) {
					t.Errorf("total %d, want %d", page.TotalSize, len(c.want))
				}
				got = append(got, ids(page)...)
				if page.NextPageToken == "" {
					break
				}
				c.q.PageToken = page.NextPageToken
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func testListOwners(t *testing.T, s tasks.Store) {
	create(t, s, alice, "a1", "c", a2a.TaskStateSubmitted, base)
	create(t, s, aliceOther, "a2", "c", a2a.TaskStateSubmitted, base)
	create(t, s, bob, "b1", "c", a2a.TaskStateSubmitted, base)
	for _, c := range []struct {
		owner tasks.Owner
		want  []string
	}{{alice, []string{"a1"}}, {aliceOther, []string{"a2"}}, {bob, []string{"b1"}}, {tasks.Owner{Principal: "carol"}, nil}} {
		page := list(t, s, tasks.ListQuery{Owner: c.owner})
		if got := ids(page); !slices.Equal(got, c.want) || page.TotalSize != len(c.want) {
			t.Errorf("%+v: %v (total %d), want %v", c.owner, got, page.TotalSize, c.want)
		}
	}
}

func testListUpdate(t *testing.T, s tasks.Store) {
	t1 := create(t, s, alice, "t1", "c", a2a.TaskStateSubmitted, base)
	create(t, s, alice, "t2", "c", a2a.TaskStateSubmitted, base.Add(time.Second))
	advance(t, s, t1, a2a.TaskStateCompleted, base.Add(2*time.Second))
	page := list(t, s, tasks.ListQuery{Owner: alice})
	if got := ids(page); !slices.Equal(got, []string{"t1", "t2"}) || page.TotalSize != 2 {
		t.Errorf("after update: %v (total %d)", got, page.TotalSize)
	}
	if page.Tasks[0].Version != 2 || page.Tasks[0].Task.Status.State != a2a.TaskStateCompleted {
		t.Errorf("listed t1 at v%d %s", page.Tasks[0].Version, page.Tasks[0].Task.Status.State)
	}
	if got := ids(list(t, s, tasks.ListQuery{Owner: alice, State: a2a.TaskStateSubmitted})); !slices.Equal(got, []string{"t2"}) {
		t.Errorf("old state still indexed: %v", got)
	}
}

func testListBadToken(t *testing.T, s tasks.Store) {
	create(t, s, alice, "t1", "c", a2a.TaskStateSubmitted, base)
	for _, tok := range []string{"not base64!", "AA", "////"} {
		_, err := s.List(t.Context(), tasks.ListQuery{Owner: alice, PageToken: tok})
		wantErr(t, "token "+tok, err, tasks.ErrInvalidPageToken)
	}
}

func testUnfinished(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	got := func() []string {
		t.Helper()
		snaps, err := s.Unfinished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range snaps {
			out = append(out, string(s.Task.ID))
		}
		slices.Sort(out)
		return out
	}
	if g := got(); len(g) != 0 {
		t.Errorf("empty store: %v", g)
	}
	sub := create(t, s, alice, "sub", "c", a2a.TaskStateSubmitted, base)
	create(t, s, bob, "work", "c", a2a.TaskStateWorking, base)
	create(t, s, alice, "done", "c", a2a.TaskStateCompleted, base)
	create(t, s, alice, "ask", "c", a2a.TaskStateInputRequired, base)
	if g, want := got(), []string{"sub", "work"}; !slices.Equal(g, want) {
		t.Errorf("unfinished = %v, want %v", g, want)
	}
	advance(t, s, sub, a2a.TaskStateFailed, base.Add(time.Second))
	if g, want := got(), []string{"work"}; !slices.Equal(g, want) {
		t.Errorf("after failing sub: %v, want %v", g, want)
	}
	snaps, _ := s.Unfinished(ctx)
	if len(snaps) == 1 && snaps[0].Owner != bob {
		t.Errorf("owner %+v, want bob", snaps[0].Owner)
	}
}

func pushConfig(task, id, url string) *a2a.PushConfig {
	return &a2a.PushConfig{TaskID: a2a.TaskID(task), ID: id, URL: url, Token: "tok-" + id,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-" + id}}
}

func testPushCRUD(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	create(t, s, alice, "t1", "c", a2a.TaskStateWorking, base)
	if got, err := s.ListPushConfigs(ctx, alice, "t1"); err != nil || len(got) != 0 {
		t.Errorf("no configs yet: %v, %v", got, err)
	}
	for _, id := range []string{"b", "a", "c"} {
		if err := s.PutPushConfig(ctx, alice, pushConfig("t1", id, "https://hook/"+id)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetPushConfig(ctx, alice, "t1", "b")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := asJSON(t, got), asJSON(t, pushConfig("t1", "b", "https://hook/b")); g != w {
		t.Errorf("get = %s, want %s", g, w)
	}
	replaced := pushConfig("t1", "b", "https://hook/b2")
	if err := s.PutPushConfig(ctx, alice, replaced); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetPushConfig(ctx, alice, "t1", "b"); got == nil || got.URL != replaced.URL {
		t.Errorf("after replace: %+v", got)
	}
	all, err := s.ListPushConfigs(ctx, alice, "t1")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, c := range all {
		order = append(order, c.ID)
	}
	if !slices.Equal(order, []string{"a", "b", "c"}) {
		t.Errorf("list order = %v", order)
	}
	if err := s.DeletePushConfig(ctx, alice, "t1", "b"); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetPushConfig(ctx, alice, "t1", "b")
	wantErr(t, "get deleted", err, tasks.ErrNotFound)
	wantErr(t, "delete twice", s.DeletePushConfig(ctx, alice, "t1", "b"), tasks.ErrNotFound)
	if all, _ := s.ListPushConfigs(ctx, alice, "t1"); len(all) != 2 {
		t.Errorf("%d configs after delete, want 2", len(all))
	}
}

func testPushNotFound(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	create(t, s, alice, "t1", "c", a2a.TaskStateWorking, base)
	if err := s.PutPushConfig(ctx, alice, pushConfig("t1", "a", "https://hook")); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "put on a missing task", s.PutPushConfig(ctx, alice, pushConfig("nope", "a", "https://hook")), tasks.ErrNotFound)
	_, err := s.ListPushConfigs(ctx, alice, "nope")
	wantErr(t, "list of a missing task", err, tasks.ErrNotFound)
	_, err = s.GetPushConfig(ctx, alice, "t1", "zz")
	wantErr(t, "get a missing config", err, tasks.ErrNotFound)
	for _, o := range []tasks.Owner{bob, aliceOther} {
		name := o.Principal + "/" + o.Tenant
		wantErr(t, "put as "+name, s.PutPushConfig(ctx, o, pushConfig("t1", "a", "https://evil")), tasks.ErrNotFound)
		_, err := s.GetPushConfig(ctx, o, "t1", "a")
		wantErr(t, "get as "+name, err, tasks.ErrNotFound)
		_, err = s.ListPushConfigs(ctx, o, "t1")
		wantErr(t, "list as "+name, err, tasks.ErrNotFound)
		wantErr(t, "delete as "+name, s.DeletePushConfig(ctx, o, "t1", "a"), tasks.ErrNotFound)
	}
	if got, err := s.GetPushConfig(ctx, alice, "t1", "a"); err != nil || got.URL != "https://hook" {
		t.Errorf("config after refused calls: %+v, %v", got, err)
	}
}

func deliveries(t *testing.T, s tasks.Store, task a2a.TaskID) []*tasks.PushDelivery {
	t.Helper()
	ds, err := s.PushDeliveries(t.Context(), task)
	if err != nil {
		t.Fatalf("push deliveries of %q: %v", task, err)
	}
	return ds
}

// testPushState: a new config starts at the task's current version; replacing
// it keeps its delivery state; UpdatePushDelivery changes only the state.
func testPushState(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	v2 := advance(t, s, create(t, s, alice, "t1", "c", a2a.TaskStateSubmitted, base), a2a.TaskStateWorking, base.Add(time.Second))
	if err := s.PutPushConfig(ctx, alice, pushConfig("t1", "a", "https://hook/1")); err != nil {
		t.Fatal(err)
	}
	ds := deliveries(t, s, "t1")
	if len(ds) != 1 || ds[0].Delivered != 2 || ds[0].Owner != alice || ds[0].Config.URL != "https://hook/1" || ds[0].Attempts != 0 {
		t.Fatalf("new config: %+v", ds)
	}
	advance(t, s, v2, a2a.TaskStateCompleted, base.Add(2*time.Second))
	next := time.Date(2026, 3, 1, 13, 0, 0, 5, time.UTC)
	d := *ds[0]
	d.Delivered, d.Attempts, d.FirstAttempt, d.NextAttempt, d.LastError, d.DeliveredCount = 2, 3, base, next, "503", 1
	d.Dead = []tasks.DeadDelivery{{Seq: 1, Attempts: 7, Reason: "gone", At: base}}
	d.Owner = bob                                         // ignored: the stored owner stays
	d.Config = pushConfig("t1", "a", "https://elsewhere") // ignored: the stored config stays
	if err := s.UpdatePushDelivery(ctx, &d); err != nil {
		t.Fatal(err)
	}
	check := func(when, url string) {
		t.Helper()
		ds := deliveries(t, s, "t1")
		if len(ds) != 1 {
			t.Fatalf("%s: %d deliveries", when, len(ds))
		}
		g := ds[0]
		if g.Owner != alice || g.Config.URL != url || g.Delivered != 2 || g.Attempts != 3 || !g.FirstAttempt.Equal(base) ||
			!g.NextAttempt.Equal(next) || g.LastError != "503" || g.DeliveredCount != 1 ||
			len(g.Dead) != 1 || g.Dead[0].Seq != 1 || g.Dead[0].Attempts != 7 || g.Dead[0].Reason != "gone" || !g.Dead[0].At.Equal(base) {
			t.Errorf("%s: %s", when, asJSON(t, g))
		}
		if g.Config.Token != "tok-a" || g.Config.Auth == nil || g.Config.Auth.Credentials != "cred-a" {
			t.Errorf("%s: config secrets not kept: %s", when, asJSON(t, g.Config))
		}
	}
	check("after update", "https://hook/1")
	if err := s.PutPushConfig(ctx, alice, pushConfig("t1", "a", "https://hook/2")); err != nil {
		t.Fatal(err)
	}
	check("after replace", "https://hook/2")
	if err := s.DeletePushConfig(ctx, alice, "t1", "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPushConfig(ctx, alice, pushConfig("t1", "a", "https://hook/3")); err != nil {
		t.Fatal(err)
	}
	if ds := deliveries(t, s, "t1"); len(ds) != 1 || ds[0].Delivered != 3 || ds[0].Attempts != 0 {
		t.Errorf("re-created config: %s", asJSON(t, ds))
	}
}

func testPushAll(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	if ds := deliveries(t, s, ""); len(ds) != 0 {
		t.Errorf("empty store: %d deliveries", len(ds))
	}
	create(t, s, bob, "t2", "c", a2a.TaskStateWorking, base)
	create(t, s, alice, "t1", "c", a2a.TaskStateWorking, base)
	create(t, s, alice, "t3", "c", a2a.TaskStateWorking, base)
	for _, c := range []struct {
		owner    tasks.Owner
		task, id string
	}{{bob, "t2", "x"}, {alice, "t1", "b"}, {alice, "t1", "a"}, {alice, "t3", "a"}} {
		if err := s.PutPushConfig(ctx, c.owner, pushConfig(c.task, c.id, "https://hook")); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(ds []*tasks.PushDelivery) []string {
		var out []string
		for _, d := range ds {
			out = append(out, string(d.Config.TaskID)+"/"+d.Config.ID)
		}
		return out
	}
	if got, want := keys(deliveries(t, s, "")), []string{"t1/a", "t1/b", "t2/x", "t3/a"}; !slices.Equal(got, want) {
		t.Errorf("all = %v, want %v", got, want)
	}
	if got := deliveries(t, s, "t2"); len(got) != 1 || got[0].Owner != bob {
		t.Errorf("t2 = %s", asJSON(t, got))
	}
	if err := s.DeletePushConfig(ctx, alice, "t3", "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(deliveries(t, s, "")), []string{"t1/a", "t1/b", "t2/x"}; !slices.Equal(got, want) {
		t.Errorf("after delete = %v, want %v", got, want)
	}
	if got := deliveries(t, s, "t3"); len(got) != 0 {
		t.Errorf("t3 after delete = %v", keys(got))
	}
}

func testPushUpdateDeleted(t *testing.T, s tasks.Store) {
	ctx := t.Context()
	create(t, s, alice, "t1", "c", a2a.TaskStateWorking, base)
	cfg := pushConfig("t1", "a", "https://hook")
	if err := s.PutPushConfig(ctx, alice, cfg); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePushConfig(ctx, alice, "t1", "a"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "update a deleted config", s.UpdatePushDelivery(ctx, &tasks.PushDelivery{Owner: alice, Config: cfg, Delivered: 1}), tasks.ErrNotFound)
	wantErr(t, "update on a missing task", s.UpdatePushDelivery(ctx, &tasks.PushDelivery{Owner: alice, Config: pushConfig("nope", "a", "https://hook")}), tasks.ErrNotFound)
	if ds := deliveries(t, s, "t1"); len(ds) != 0 {
		t.Errorf("update re-created the config: %s", asJSON(t, ds))
	}
}

func testCorrupt(t *testing.T, s tasks.Store) {
	c, ok := s.(Corrupter)
	if !ok {
		t.Skip("the store under test cannot corrupt its records")
	}
	ctx := t.Context()
	create(t, s, alice, "t1", "c", a2a.TaskStateWorking, base)
	if err := s.PutPushConfig(ctx, alice, pushConfig("t1", "a", "https://hook")); err != nil {
		t.Fatal(err)
	}
	c.CorruptEvent(t, "t1", 1)
	_, err := s.Events(ctx, alice, "t1", 0)
	wantErr(t, "events", err, tasks.ErrCorrupt)

	c.CorruptPushConfig(t, "t1", "a")
	_, err = s.GetPushConfig(ctx, alice, "t1", "a")
	wantErr(t, "get push config", err, tasks.ErrCorrupt)
	_, err = s.ListPushConfigs(ctx, alice, "t1")
	wantErr(t, "list push configs", err, tasks.ErrCorrupt)
	_, err = s.PushDeliveries(ctx, "t1")
	wantErr(t, "push deliveries", err, tasks.ErrCorrupt)
	_, err = s.PushDeliveries(ctx, "")
	wantErr(t, "all push deliveries", err, tasks.ErrCorrupt)
	wantErr(t, "delete push config", s.DeletePushConfig(ctx, alice, "t1", "a"), tasks.ErrCorrupt)

	c.CorruptTask(t, "t1")
	_, err = s.Get(ctx, alice, "t1")
	wantErr(t, "get", err, tasks.ErrCorrupt)
	_, err = s.List(ctx, tasks.ListQuery{Owner: alice})
	wantErr(t, "list", err, tasks.ErrCorrupt)
	_, err = s.Unfinished(ctx)
	wantErr(t, "unfinished", err, tasks.ErrCorrupt)
}

// testClosed wants every call after Close to fail with ErrClosed, and a
// second Close to succeed.
func testClosed(t *testing.T, s tasks.Store) {
	create(t, s, alice, "t1", "c", a2a.TaskStateWorking, base)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	ctx := t.Context()
	cfg := pushConfig("t1", "a", "https://hook")
	next := snapshot(alice, "t1", "c", a2a.TaskStateCompleted, 2, base.Add(time.Second))
	calls := map[string]func() error{
		"Append": func() error { return s.Append(ctx, next, []a2a.Event{statusEvent(next)}) },
		"Get":    func() error { _, err := s.Get(ctx, alice, "t1"); return err },
		"Events": func() error { _, err := s.Events(ctx, alice, "t1", 0); return err },
		"List":   func() error { _, err := s.List(ctx, tasks.ListQuery{Owner: alice}); return err },
		"Unfinished": func() error {
			_, err := s.Unfinished(ctx)
			return err
		},
		"PutPushConfig":    func() error { return s.PutPushConfig(ctx, alice, cfg) },
		"GetPushConfig":    func() error { _, err := s.GetPushConfig(ctx, alice, "t1", "a"); return err },
		"ListPushConfigs":  func() error { _, err := s.ListPushConfigs(ctx, alice, "t1"); return err },
		"DeletePushConfig": func() error { return s.DeletePushConfig(ctx, alice, "t1", "a") },
		"PushDeliveries":   func() error { _, err := s.PushDeliveries(ctx, ""); return err },
		"UpdatePushDelivery": func() error {
			return s.UpdatePushDelivery(ctx, &tasks.PushDelivery{Owner: alice, Config: cfg})
		},
	}
	for name, call := range calls {
		wantErr(t, name, call(), tasks.ErrClosed)
	}
}

// testConcurrent runs 50 writers on their own tasks beside two writers that
// race for each version of one task: exactly one of them wins each round.
func testConcurrent(t *testing.T, s tasks.Store) {
	const writers, steps, rounds = 50, 8, 20
	ctx := t.Context()
	var wg sync.WaitGroup
	defer wg.Wait() // a failed round must not end the test under running writers
	for w := range writers {
		wg.Go(func() {
			prev := snapshot(alice, fmt.Sprintf("w%02d", w), "c", a2a.TaskStateSubmitted, 0, base)
			for i := range steps {
				next := snapshot(alice, string(prev.Task.ID), "c", a2a.TaskStateWorking, prev.Version+1, base.Add(time.Duration(i)))
				if err := s.Append(ctx, next, []a2a.Event{statusEvent(next)}); err != nil {
					t.Errorf("writer %d step %d: %v", w, i, err)
					return
				}
				prev = next
			}
		})
	}
	prev := create(t, s, bob, "race", "c", a2a.TaskStateSubmitted, base)
	for round := range rounds {
		start := make(chan struct{})
		errs := make([]error, 2)
		snaps := make([]*tasks.Snapshot, 2)
		var racers sync.WaitGroup
		for r := range 2 {
			// Different content on each side: the loser's write is not the winner's.
			next := snapshot(bob, "race", fmt.Sprintf("round%d-writer%d", round, r), a2a.TaskStateWorking, prev.Version+1, base.Add(time.Duration(round)))
			snaps[r] = next
			racers.Go(func() {
				<-start
				errs[r] = s.Append(ctx, next, []a2a.Event{statusEvent(next)})
			})
		}
		close(start)
		racers.Wait()
		won := -1
		for r, err := range errs {
			switch {
			case err == nil && won == -1:
				won = r
			case err == nil:
				t.Fatalf("round %d: both writers won", round)
			case !errors.Is(err, tasks.ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want ErrConflict", round, r, err)
			}
		}
		if won == -1 {
			t.Fatalf("round %d: nobody won: %v", round, errs)
		}
		prev = snaps[won]
		sameSnapshot(t, mustGet(t, s, bob, "race"), prev)
	}
	wg.Wait()
	for w := range writers {
		id := fmt.Sprintf("w%02d", w)
		evs, err := s.Events(ctx, alice, a2a.TaskID(id), 0)
		if err != nil || len(evs) != steps || evs[steps-1].Seq != steps {
			t.Errorf("%s: %d events, %v", id, len(evs), err)
		}
	}
	if evs, _ := s.Events(ctx, bob, "race", 0); len(evs) != rounds+1 {
		t.Errorf("race task: %d events, want %d", len(evs), rounds+1)
	}
	if page := list(t, s, tasks.ListQuery{Owner: alice, PageSize: 100}); page.TotalSize != writers {
		t.Errorf("listed %d tasks, want %d", page.TotalSize, writers)
	}
}
