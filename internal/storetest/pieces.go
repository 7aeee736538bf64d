package storetest

import (
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// The cases below run long tasks through tasks.Apply, as the engine does,
// one Append per write, and read them back once the store has them all
// (settled): a store may keep a task in pieces and write only what each
// event adds, and these check that the pieces make the task again.

// start stores a new working task of alice's.
func start(t *testing.T, s tasks.Store, id string) *tasks.Snapshot {
	t.Helper()
	task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "ctx-" + id, Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("run"))}}
	snap, err := tasks.Apply(nil, task, base)
	if err != nil {
		t.Fatal(err)
	}
	snap.Owner = alice
	if err := s.Append(t.Context(), snap, []a2a.Event{task}); err != nil {
		t.Fatalf("create task %s: %v", id, err)
	}
	return snap
}

// write applies evs to prev and stores the result in one Append.
func write(t *testing.T, s tasks.Store, prev *tasks.Snapshot, evs ...a2a.Event) *tasks.Snapshot {
	t.Helper()
	next := prev
	for i, ev := range evs {
		var err error
		if next, err = tasks.Apply(next, ev, base.Add(time.Duration(next.Version+uint64(i))*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(t.Context(), next, evs); err != nil {
		t.Fatalf("append to %s: %v", prev.Task.ID, err)
	}
	return next
}

// settled reads task id once the store has every write made before:
// Events waits for them where a store applies writes in the background.
func settled(t *testing.T, s tasks.Store, id a2a.TaskID) *tasks.Snapshot {
	t.Helper()
	if _, err := s.Events(t.Context(), alice, id, 0); err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return mustGet(t, s, alice, string(id))
}

func progress(task *a2a.Task, i int) a2a.Event {
	return a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart("step "+strconv.Itoa(i))))
}

func chunk(task *a2a.Task, id a2a.ArtifactID, text string, appendTo bool) *a2a.TaskArtifactUpdateEvent {
	ev := &a2a.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Append: appendTo,
		Artifact: &a2a.Artifact{ID: id, Parts: a2a.ContentParts{a2a.NewTextPart(text)}}}
	return ev
}

// testLongHistory checks a task of many status updates, and, on a store
// that reads only the newest entries (tasks.HistoryReader), its tail.
func testLongHistory(t *testing.T, s tasks.Store) {
	snap := start(t, s, "long")
	for i := range 300 {
		snap = write(t, s, snap, progress(snap.Task, i))
	}
	snap = write(t, s, snap, progress(snap.Task, 300), progress(snap.Task, 301), chunk(snap.Task, "out", "x", false))
	sameSnapshot(t, settled(t, s, "long"), snap)
	hr, ok := s.(tasks.HistoryReader)
	if !ok {
		return
	}
	for _, n := range []int{0, 1, 10, len(snap.Task.History), len(snap.Task.History) + 5} {
		got, err := hr.GetRecent(t.Context(), alice, "long", n)
		if err != nil {
			t.Fatalf("GetRecent %d: %v", n, err)
		}
		want := *snap.Task
		want.History = want.History[len(want.History)-min(n, len(want.History)):]
		if n == 0 {
			want.History = nil
		}
		sameSnapshot(t, got, &tasks.Snapshot{Task: &want, Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated})
	}
	if _, err := hr.GetRecent(t.Context(), bob, "long", 10); err == nil {
		t.Error("GetRecent read another owner's task")
	}
}

// testArtifactChunks checks artifacts streamed in many appends, some
// writes holding several events, read back whole.
func testArtifactChunks(t *testing.T, s tasks.Store) {
	snap := start(t, s, "chunks")
	snap = write(t, s, snap, chunk(snap.Task, "a", "first", false))
	for i := range 200 {
		snap = write(t, s, snap, chunk(snap.Task, "a", ", "+strconv.Itoa(i), true))
		if i%50 == 0 {
			snap = write(t, s, snap, chunk(snap.Task, "b", "b"+strconv.Itoa(i), i > 0), chunk(snap.Task, "a", "+", true), progress(snap.Task, i))
		}
	}
	meta := chunk(snap.Task, "a", "!", true)
	meta.Artifact.Metadata = map[string]any{"done": true}
	snap = write(t, s, snap, meta)
	sameSnapshot(t, settled(t, s, "chunks"), snap)
	if n := len(snap.Task.Artifacts[0].Parts); n != 204+1+1 {
		t.Fatalf("the test built an artifact of %d parts", n)
	}
}

// testReplaceAfterAppend checks the writes that replace what was appended
// to: an artifact replaced after appends (alone, and in the write of an
// append), a metadata change, and the whole task yielded again with a
// shorter history.
func testReplaceAfterAppend(t *testing.T, s tasks.Store) {
	snap := start(t, s, "replace")
	snap = write(t, s, snap, chunk(snap.Task, "a", "one", false))
	snap = write(t, s, snap, chunk(snap.Task, "a", "two", true), progress(snap.Task, 1))
	check := func(what string) {
		t.Helper()
		got := settled(t, s, "replace")
		if g, w := asJSON(t, got.Task), asJSON(t, snap.Task); g != w {
			t.Fatalf("after %s:\n got %s\nwant %s", what, g, w)
		}
	}
	check("appends")
	snap = write(t, s, snap, chunk(snap.Task, "a", "replaced", false))
	snap = write(t, s, snap, chunk(snap.Task, "a", " and more", true))
	check("a replace, then an append")
	snap = write(t, s, snap, chunk(snap.Task, "a", "again", false), chunk(snap.Task, "a", " then", true))
	snap = write(t, s, snap, chunk(snap.Task, "a", " after", true))
	check("a replace and an append in one write")
	up := progress(snap.Task, 2).(*a2a.TaskStatusUpdateEvent)
	up.Metadata = map[string]any{"k": "v"}
	snap = write(t, s, snap, up)
	check("a metadata change")
	whole := &a2a.Task{ID: snap.Task.ID, ContextID: snap.Task.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("shorter"))},
		Artifacts: []*a2a.Artifact{{ID: "z", Parts: a2a.ContentParts{a2a.NewTextPart("z")}}}}
	snap = write(t, s, snap, whole)
	check("the whole task, shorter")
	snap = write(t, s, snap, progress(snap.Task, 3), chunk(snap.Task, "z", "z2", true))
	snap = write(t, s, snap, progress(snap.Task, 4))
	check("appends after the whole task")
}

// testListShown checks List with HistoryLength and SkipArtifacts: each
// task has at least the newest entries asked for (the store may give more)
// as a tail of its history, and its artifacts whole or, when skipped, none
// (or whole: the store may give them).
func testListShown(t *testing.T, s tasks.Store) {
	var want []*tasks.Snapshot
	for i := range 3 {
		snap := start(t, s, "shown"+strconv.Itoa(i))
		for j := range 8 * i {
			snap = write(t, s, snap, progress(snap.Task, j))
		}
		snap = write(t, s, snap, chunk(snap.Task, "a", "p", false), chunk(snap.Task, "a", "q", true))
		want = append([]*tasks.Snapshot{snap}, want...) // newest first
	}
	settled(t, s, want[0].Task.ID)
	three := 3
	for _, q := range []tasks.ListQuery{
		{Owner: alice},
		{Owner: alice, HistoryLength: &three},
		{Owner: alice, SkipArtifacts: true},
		{Owner: alice, HistoryLength: &three, SkipArtifacts: true},
	} {
		page := list(t, s, q)
		if len(page.Tasks) != len(want) || page.TotalSize != len(want) {
			t.Fatalf("list %+v: %d tasks, total %d", q, len(page.Tasks), page.TotalSize)
		}
		for i, got := range page.Tasks {
			w := want[i]
			g := *got.Task
			h := w.Task.History
			if q.HistoryLength != nil {
				if n := len(g.History); n < min(*q.HistoryLength, len(h)) || n > len(h) || asJSON(t, g.History) != asJSON(t, h[len(h)-n:]) {
					t.Fatalf("list %+v: task %s has %d history entries, not a tail of its %d", q, g.ID, n, len(h))
				}
				g.History = h
			}
			if q.SkipArtifacts && len(g.Artifacts) == 0 {
				g.Artifacts = w.Task.Artifacts
			}
			sameSnapshot(t, &tasks.Snapshot{Task: &g, Owner: got.Owner, Version: got.Version, Updated: got.Updated}, w)
		}
	}
}
