package acceptance_test

import (
	"context"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
)

// purgeMarker is what retention needs of a ledger.
type purgeMarker interface {
	MarkPurged(ctx context.Context, at time.Time, tasks ...string) (int, error)
}

// TestMarkPurged: on both ledgers, the entries of a purged task (its own
// delegation and a Go executor's TASK#... ones) are kept and say when the
// task was purged; the first mark's time stays; other entries are untouched.
func TestMarkPurged(t *testing.T) {
	for _, b := range ledgerBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			l := b.place(t)(t)
			committed := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
			for _, id := range []string{"t1", "t2#s-1", "t2#s-2", "t20", "t3"} {
				if _, err := l.Commit(ctx, &acceptance.Entry{DelegationID: id, Skill: "s", CommittedAt: committed}); err != nil {
					t.Fatal(err)
				}
			}
			m, ok := l.(purgeMarker)
			if !ok {
				t.Fatalf("%T has no MarkPurged", l)
			}
			at := committed.Add(48 * time.Hour)
			n, err := m.MarkPurged(ctx, at, "t1", "t2", "no-such-task")
			if err != nil || n != 3 {
				t.Fatalf("mark purged = %d, %v; want 3 entries", n, err)
			}
			if n, err := m.MarkPurged(ctx, at.Add(time.Hour), "t1"); err != nil || n != 0 {
				t.Errorf("mark again = %d, %v; want 0 (the first mark stays)", n, err)
			}
			want := map[string]time.Time{"t1": at, "t2#s-1": at, "t2#s-2": at, "t20": {}, "t3": {}}
			all, err := l.List(ctx, 0)
			if err != nil || len(all) != len(want) {
				t.Fatalf("list: %d entries, %v", len(all), err)
			}
			for _, e := range all {
				if !e.TaskPurgedAt.Equal(want[e.DelegationID]) {
					t.Errorf("%s: task_purged_at = %v, want %v", e.DelegationID, e.TaskPurgedAt, want[e.DelegationID])
				}
			}
			if e, err := l.Get(ctx, "t2#s-1"); err != nil || !e.TaskPurgedAt.Equal(at) || e.Skill != "s" {
				t.Errorf("get t2#s-1 = %+v, %v", e, err)
			}
		})
	}
}
