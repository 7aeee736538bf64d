package tasks_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
)

// BenchmarkApplyHistory applies one status update with a message to a task
// that already has n history entries, and then keeps applying to the
// result, as the engine does for one long task: the cost per event should
// not grow with n.
func BenchmarkApplyHistory(b *testing.B) {
	for _, n := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("history-%d", n), func(b *testing.B) {
			task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
			for range n {
				task.History = append(task.History, a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart("step")))
			}
			snap := &tasks.Snapshot{Task: task, Version: 1}
			ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart("step")))
			now := time.Unix(1, 0)
			b.ReportAllocs()
			for b.Loop() {
				next, err := tasks.Apply(snap, ev, now)
				if err != nil {
					b.Fatal(err)
				}
				snap = next
			}
		})
	}
}

// BenchmarkApplyArtifactChunks appends one chunk to an artifact that
// already has n parts, and keeps appending to the result, as a task
// streaming one large artifact does.
func BenchmarkApplyArtifactChunks(b *testing.B) {
	for _, n := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("parts-%d", n), func(b *testing.B) {
			task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
			art := &a2a.Artifact{ID: "out"}
			for range n {
				art.Parts = append(art.Parts, a2a.NewTextPart("chunk"))
			}
			task.Artifacts = []*a2a.Artifact{art}
			snap := &tasks.Snapshot{Task: task, Version: 1}
			ev := a2a.NewArtifactUpdateEvent(task, "out", a2a.NewTextPart("chunk"))
			ev.Append = true
			now := time.Unix(1, 0)
			b.ReportAllocs()
			for b.Loop() {
				next, err := tasks.Apply(snap, ev, now)
				if err != nil {
					b.Fatal(err)
				}
				snap = next
			}
		})
	}
}
