package tasks_test

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// TestApplyHistoryInPlace checks that history appended in place stays each
// snapshot's own: an executor appending to the task it was handed (a
// snapshot's) does not write into the entry the next event takes, and a
// snapshot's history does not change when its successor is made.
func TestApplyHistoryInPlace(t *testing.T) {
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	snap, err := tasks.Apply(nil, task, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	msg := func(text string) *a2a.Message {
		return a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart(text))
	}
	var snaps []*tasks.Snapshot
	for i := range 50 {
		ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, msg(string(rune('a'+i%26))))
		prev := snap
		if snap, err = tasks.Apply(prev, ev, time.Unix(2, 0)); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
		// An executor's append, on the task it was handed before this event.
		_ = append(prev.Task.History, msg("executor"))
	}
	for i, s := range snaps {
		if len(s.Task.History) != i {
			t.Fatalf("snapshot %d: %d history entries, want %d", i, len(s.Task.History), i)
		}
		for j, m := range s.Task.History {
			if want := snaps[j].Task.Status.Message; m != want {
				t.Fatalf("snapshot %d: history[%d] = %v, want the status message of snapshot %d", i, j, m.Parts, j)
			}
		}
	}
}

// TestApplyArtifactChunksInPlace is TestApplyHistoryInPlace for the parts
// of an artifact streamed in chunks.
func TestApplyArtifactChunksInPlace(t *testing.T) {
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	snap, err := tasks.Apply(nil, task, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	var snaps []*tasks.Snapshot
	for i := range 50 {
		ev := a2a.NewArtifactUpdateEvent(task, "out", a2a.NewTextPart(string(rune('a'+i%26))))
		ev.Append = i > 0
		prev := snap
		if snap, err = tasks.Apply(prev, ev, time.Unix(2, 0)); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
		if i > 0 {
			// An executor's append, on the task it was handed before this event.
			_ = append(prev.Task.Artifacts[0].Parts, a2a.NewTextPart("executor"))
		}
	}
	for i, s := range snaps {
		parts := s.Task.Artifacts[0].Parts
		if len(parts) != i+1 {
			t.Fatalf("snapshot %d: %d parts, want %d", i, len(parts), i+1)
		}
		for j, p := range parts {
			if want := string(rune('a' + j%26)); p.Text() != want {
				t.Fatalf("snapshot %d: part %d is %q, want %q", i, j, p.Text(), want)
			}
		}
	}
}
