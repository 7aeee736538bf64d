package redisstore_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// meter counts what a client sends: round trips, commands and the bytes of
// their arguments.
type meter struct {
	trips, cmds, bytes atomic.Int64
}

func (m *meter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (m *meter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		m.trips.Add(1)
		m.count(cmd)
		return next(ctx, cmd)
	}
}

func (m *meter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		m.trips.Add(1)
		for _, c := range cmds {
			m.count(c)
		}
		return next(ctx, cmds)
	}
}

func (m *meter) count(cmd redis.Cmder) {
	m.cmds.Add(1)
	for _, a := range cmd.Args() {
		switch v := a.(type) {
		case string:
			m.bytes.Add(int64(len(v)))
		case []byte:
			m.bytes.Add(int64(len(v)))
		default:
			m.bytes.Add(int64(len(fmt.Sprint(v))))
		}
	}
}

func (m *meter) reset() { m.trips.Store(0); m.cmds.Store(0); m.bytes.Store(0) }

// longTask applies n rounds of a status update with a message and an
// artifact chunk to a new task, appending each event to s, and returns the
// last snapshot. With m, it reports the bytes sent by the first and the
// last ten appends.
func longTask(t *testing.T, s tasks.Store, owner tasks.Owner, id string, n int, m *meter) (snap *tasks.Snapshot, first, last int64) {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	apply := func(ev a2a.Event) {
		t.Helper()
		next, err := tasks.Apply(snap, ev, now)
		if err != nil {
			t.Fatal(err)
		}
		next.Owner = owner
		if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
			t.Fatalf("append %d: %v", next.Version, err)
		}
		snap = next
	}
	apply(task)
	art := a2a.NewArtifactID()
	for i := range n {
		if m != nil && (i == 10 || i == n-10) {
			m.reset()
		}
		msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, snap.Task, a2a.NewTextPart(fmt.Sprintf("step %d", i)))
		apply(a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateWorking, msg))
		ev := a2a.NewArtifactUpdateEvent(snap.Task, art, a2a.NewTextPart(fmt.Sprintf("chunk %d", i)))
		ev.Append = i > 0
		apply(ev)
		if m != nil && i == 19 {
			first = m.bytes.Load()
		}
		if m != nil && i == n-1 {
			last = m.bytes.Load()
		}
	}
	return snap, first, last
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRedisAppendWritesTail: the bytes an append sends do not grow with
// the task (before the head/list layout, an append at step 500 sent the
// whole history and every chunk again), and the task reads back whole.
func TestRedisAppendWritesTail(t *testing.T) {
	url := redistest.ServerURL(t)
	s, _ := redistest.OpenStore(t, url)
	m := &meter{}
	s.Client().AddHook(m)
	alice := tasks.Owner{Principal: "alice"}
	want, first, last := longTask(t, s, alice, "long", 500, m)
	t.Logf("bytes sent by ten appends: at step 10 %d, at step 490 %d", first, last)
	if last > first*3/2 {
		t.Errorf("ten appends at step 500 sent %d bytes, at step 10 %d: want within 1.5x", last, first)
	}
	got, err := s.Get(t.Context(), alice, "long")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := jsonOf(t, got.Task), jsonOf(t, want.Task); g != w {
		t.Fatalf("task read back:\n%.300s\nwant\n%.300s", g, w)
	}
	if len(got.Task.History) != 499 || len(got.Task.Artifacts[0].Parts) != 500 {
		t.Fatalf("history %d, parts %d: want 499, 500", len(got.Task.History), len(got.Task.Artifacts[0].Parts))
	}
}

// TestRedisGetRecent: GetRecent reads the newest entries only, and its
// bytes received do not depend on the history's length.
func TestRedisGetRecent(t *testing.T) {
	url := redistest.ServerURL(t)
	s, _ := redistest.OpenStore(t, url)
	alice := tasks.Owner{Principal: "alice"}
	want, _, _ := longTask(t, s, alice, "t", 50, nil)
	for _, n := range []int{0, 1, 10, 49, 100} {
		got, err := s.GetRecent(t.Context(), alice, "t", n)
		if err != nil {
			t.Fatal(err)
		}
		h := want.Task.History[len(want.Task.History)-min(n, len(want.Task.History)):]
		if g, w := jsonOf(t, got.Task.History), jsonOf(t, h); n > 0 && g != w {
			t.Errorf("GetRecent(%d) history = %.200s, want %.200s", n, g, w)
		}
		if n == 0 && len(got.Task.History) != 0 {
			t.Errorf("GetRecent(0) history has %d entries", len(got.Task.History))
		}
		if got.Version != want.Version || len(got.Task.Artifacts[0].Parts) != 50 {
			t.Errorf("GetRecent(%d): version %d, parts %d", n, got.Version, len(got.Task.Artifacts[0].Parts))
		}
	}
	if _, err := s.GetRecent(t.Context(), tasks.Owner{Principal: "bob"}, "t", 1); err == nil {
		t.Fatal("GetRecent of another owner's task succeeded")
	}
	page, err := s.List(t.Context(), tasks.ListQuery{Owner: alice, HistoryLength: new(2), SkipArtifacts: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != 1 || len(page.Tasks[0].Task.History) != 2 || page.Tasks[0].Task.Artifacts != nil {
		t.Fatalf("List with HistoryLength 2, SkipArtifacts: %s", jsonOf(t, page.Tasks))
	}
}

// TestRedisOldLayoutReads: a task stored whole in its hash's "record" field,
// as before the head/list layout, reads as it is, and its next append moves
// it to the new layout.
func TestRedisOldLayoutReads(t *testing.T) {
	ctx := t.Context()
	url := redistest.ServerURL(t)
	s, prefix := redistest.OpenStore(t, url)
	rdb := redistest.ClientFor(t, url)
	alice := tasks.Owner{Principal: "alice"}

	// Build a task as Apply would, then store it the old way.
	scratch, sp := redistest.OpenStore(t, url)
	snap, _, _ := longTask(t, scratch, alice, "old", 5, nil)
	rec, err := json.Marshal(record.Task{Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated, Task: snap.Task})
	if err != nil {
		t.Fatal(err)
	}
	owner := jsonOf(t, alice)
	evs, err := scratch.Events(ctx, alice, "old", 0)
	if err != nil {
		t.Fatal(err)
	}
	members := rdb.ZRange(ctx, indexKey(sp, alice), 0, 0).Val()
	if len(members) != 1 {
		t.Fatalf("scratch index holds %d members", len(members))
	}
	member := members[0]
	for _, e := range evs {
		b, err := json.Marshal(a2a.StreamResponse{Event: e.Event})
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "events:old", ID: fmt.Sprintf("0-%d", e.Seq), Values: []any{"e", b}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HSet(ctx, prefix+"task:old", "owner", owner, "version", snap.Version, "member", member, "record", rec).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, indexKey(prefix, alice), redis.Z{Member: member}).Err(); err != nil {
		t.Fatal(err)
	}

	got, err := s.Get(ctx, alice, "old")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := jsonOf(t, got.Task), jsonOf(t, snap.Task); g != w {
		t.Fatalf("old-layout task read:\n%s\nwant\n%s", g, w)
	}
	recent, err := s.GetRecent(ctx, alice, "old", 2)
	if err != nil || len(recent.Task.History) != 2 || recent.Task.History[1].ID != snap.Task.History[len(snap.Task.History)-1].ID {
		t.Fatalf("GetRecent(2) of an old-layout task: %v, %v", recent, err)
	}
	page, err := s.List(ctx, tasks.ListQuery{Owner: alice})
	if err != nil || len(page.Tasks) != 1 || jsonOf(t, page.Tasks[0].Task) != jsonOf(t, snap.Task) {
		t.Fatalf("List of an old-layout task: %v, %v", page, err)
	}

	// The next append rewrites it in the new layout.
	ev := a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateCompleted, nil)
	next, err := tasks.Apply(snap, ev, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if rdb.HExists(ctx, prefix+"task:old", "record").Val() {
		t.Error("the old record is still stored after an append")
	}
	if n := rdb.LLen(ctx, prefix+"hist:old").Val(); n != int64(len(next.Task.History)) {
		t.Errorf("history list holds %d entries, want %d", n, len(next.Task.History))
	}
	got, err = s.Get(ctx, alice, "old")
	if err != nil || jsonOf(t, got.Task) != jsonOf(t, next.Task) || got.Version != next.Version {
		t.Fatalf("task after the append: %v, %v", got, err)
	}
}

// indexKey is the owner index key of o under a store's key prefix.
func indexKey(prefix string, o tasks.Owner) string {
	return prefix + "owner:" + base64.RawURLEncoding.EncodeToString(record.OwnerKey(o))
}

// TestRedisTailKeysExpireAndPurge: with retention, a finished task's
// history and parts lists expire with its hash, and a purge deletes them.
func TestRedisTailKeysExpireAndPurge(t *testing.T) {
	ctx := t.Context()
	url := redistest.ServerURL(t)
	keep := tasks.Retention{Finished: time.Hour}
	s, prefix := redistest.OpenStore(t, url, redisstore.WithRetention(keep))
	rdb := redistest.ClientFor(t, url)
	alice := tasks.Owner{Principal: "alice"}
	snap, _, _ := longTask(t, s, alice, "done", 3, nil)
	ev := a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateCompleted, nil)
	next, err := tasks.Apply(snap, ev, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	next.Owner = alice
	if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
		t.Fatal(err)
	}
	want := time.Hour + redisstore.ExpiryGrace
	for _, k := range []string{"task:done", "events:done", "hist:done", "parts:done"} {
		if ttl := rdb.PTTL(ctx, prefix+k).Val(); ttl <= want-time.Minute || ttl > want {
			t.Errorf("TTL of %s = %v, want about %v", k, ttl, want)
		}
	}
	res, err := s.Purge(ctx, keep, time.Now().Add(2*time.Hour), []a2a.TaskID{"done"})
	if err != nil || len(res.Tasks) != 1 {
		t.Fatalf("purge: %v, %v", res, err)
	}
	for _, k := range []string{"task:done", "events:done", "hist:done", "parts:done"} {
		if rdb.Exists(ctx, prefix+k).Val() != 0 {
			t.Errorf("%s is left after the purge", k)
		}
	}
}
