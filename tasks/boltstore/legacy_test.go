package boltstore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// TestLegacyFiles opens store files written by the store before tasks were
// kept in pieces (testdata/legacy-*: one closed cleanly, one copied while
// open, its log holding records bbolt had not applied), reads every task as
// it was written, and goes on appending to one.
func TestLegacyFiles(t *testing.T) {
	for _, name := range []string{"legacy-closed", "legacy-crashed"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files, err := filepath.Glob(filepath.Join("testdata", name, "*"))
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]*tasks.Snapshot
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if filepath.Base(f) == "want.json" {
					if err := json.Unmarshal(b, &want); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "tasks.db")
			s, err := boltstore.Open(path, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			owner := tasks.Owner{Principal: "alice"}
			for id, w := range want {
				got, err := s.Get(ctx, owner, a2a.TaskID(id))
				if err != nil {
					t.Fatal(err)
				}
				if g, w := jsonOf(t, got), jsonOf(t, w); g != w {
					t.Fatalf("task %s:\n got %s\nwant %s", id, g, w)
				}
			}
			page, err := s.List(ctx, tasks.ListQuery{Owner: owner, State: a2a.TaskStateCompleted})
			if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Task.ID != "legacy-b" {
				t.Fatalf("list completed: %v, %+v", err, page)
			}
			// An append to a task stored whole rewrites it, then reads back.
			prev := want["legacy-a"]
			ev := a2a.NewStatusUpdateEvent(prev.Task, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, prev.Task, a2a.NewTextPart("done")))
			next, err := tasks.Apply(prev, ev, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, next, []a2a.Event{ev}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = boltstore.Open(path, time.Second); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, owner, "legacy-a")
			if err != nil {
				t.Fatal(err)
			}
			if g, w := jsonOf(t, got), jsonOf(t, next); g != w {
				t.Fatalf("after append:\n got %s\nwant %s", g, w)
			}
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
