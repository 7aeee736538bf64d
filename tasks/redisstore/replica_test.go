package redisstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/tasks"
)

// TestRedisLeases: a lease has one holder until it is released or expires;
// renewing keeps it, takes back one that expired unclaimed, and reports one
// another holder took.
func TestRedisLeases(t *testing.T) {
	s, _ := redistest.OpenStore(t, redistest.ServerURL(t))
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	claim := func(id a2a.TaskID, holder string) bool {
		t.Helper()
		ok, err := s.Claim(ctx, id, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	holder := func(id a2a.TaskID) string {
		t.Helper()
		h, err := s.Holder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if !claim("t1", "a") || claim("t1", "b") || holder("t1") != "a" {
		t.Fatalf("t1: a claims, b is refused, a holds: holder %q", holder("t1"))
	}
	if err := s.Release(ctx, "t1", "b"); err != nil || holder("t1") != "a" {
		t.Fatalf("b released a's lease: %v, holder %q", err, holder("t1"))
	}
	if err := s.Release(ctx, "t1", "a"); err != nil || holder("t1") != "" || !claim("t1", "b") {
		t.Fatalf("after a's release: %v, holder %q, b could not claim", err, holder("t1"))
	}
	if !claim("t2", "a") || !claim("t3", "a") {
		t.Fatal("a could not claim t2 and t3")
	}
	// Renewed for longer than the TTL, a's leases stay a's.
	for range 4 {
		if lost, err := s.Renew(ctx, []a2a.TaskID{"t2", "t3"}, "a", ttl); err != nil || len(lost) != 0 {
			t.Fatalf("renew: lost %v, %v", lost, err)
		}
		time.Sleep(ttl / 3)
	}
	// t3 expires unrenewed; b takes it; a's renewal reports it lost.
	redistest.WaitFor(t, 5*time.Second, "t3 to expire", func() bool { return holder("t3") == "" })
	if !claim("t3", "b") {
		t.Fatal("b could not claim the expired t3")
	}
	if err := s.Release(ctx, "t2", "a"); err != nil {
		t.Fatal(err)
	}
	lost, err := s.Renew(ctx, []a2a.TaskID{"t2", "t3"}, "a", ttl)
	if err != nil || !slices.Equal(lost, []a2a.TaskID{"t3"}) || holder("t2") != "a" {
		t.Fatalf("renew after t3 went to b: lost %v (want [t3]), %v; t2 held by %q (want a: taken back)", lost, err, holder("t2"))
	}
}

// TestRedisTail: one read returns, per task, the events after the given
// sequence numbers, in order; with nothing new it waits for the block.
func TestRedisTail(t *testing.T) {
	s, _ := redistest.OpenStore(t, redistest.ServerURL(t))
	ctx := t.Context()
	owner := tasks.Owner{Principal: "p"}
	for _, id := range []string{"a", "b"} {
		snap := newTask(owner, id, a2a.TaskStateWorking, 1)
		if err := s.Append(ctx, snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	got, err := s.Tail(ctx, map[a2a.TaskID]uint64{"a": 1, "b": 1}, 200*time.Millisecond)
	if err != nil || len(got) != 0 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("tail with nothing new = %v, %v after %s; want nothing after the block", got, err, time.Since(start))
	}
	prev := newTask(owner, "b", a2a.TaskStateWorking, 1)
	evs := []a2a.Event{a2a.NewArtifactEvent(prev.Task, a2a.NewTextPart("x")), a2a.NewStatusUpdateEvent(prev.Task, a2a.TaskStateCompleted, nil)}
	next := newTask(owner, "b", a2a.TaskStateCompleted, 3)
	if err := s.Append(ctx, next, evs); err != nil {
		t.Fatal(err)
	}
	got, err = s.Tail(ctx, map[a2a.TaskID]uint64{"a": 1, "b": 1}, time.Second)
	if err != nil || len(got) != 1 || len(got["b"]) != 2 || got["b"][0].Seq != 2 || got["b"][1].Seq != 3 {
		t.Fatalf("tail = %v, %v; want b's events 2 and 3", got, err)
	}
	if _, ok := got["b"][1].Event.(*a2a.TaskStatusUpdateEvent); !ok {
		t.Fatalf("b's event 3 = %T, want the status update", got["b"][1].Event)
	}
	got, err = s.Tail(ctx, map[a2a.TaskID]uint64{"b": 0}, time.Second)
	if err != nil || len(got["b"]) != 3 || got["b"][0].Seq != 1 {
		t.Fatalf("tail of b from 0 = %v, %v; want its 3 events", got, err)
	}
}
