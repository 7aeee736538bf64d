package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

func TestStoreStatsPurgeHelp(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"stats": {"--data-dir DIR", "--redis URL", "--namespace NS", "tasks by state", "last purge"},
		"purge": {"--older-than D", "--tenant T", "--yes", "dry run", "ledger", "running agent"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"store", cmd, "--help"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("store %s --help: %v", cmd, err)
		}
		for _, want := range wants {
			if !strings.Contains(strings.ReplaceAll(out.String(), "\n", " "), want) {
				t.Errorf("store %s --help lacks %q:\n%s", cmd, want, out.String())
			}
		}
	}
}

func TestStoreStatsPurgeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"store", "purge", "--data-dir", "d"},                                      // no --older-than
		{"store", "purge", "--older-than", "-1h", "--data-dir", "d"},               // not positive
		{"store", "purge", "--older-than", "1h"},                                   // no store
		{"store", "purge", "--older-than", "1h", "--redis", "redis://127.0.0.1:1"}, // no namespace
		{"store", "stats", "--data-dir", "d", "--redis", "redis://127.0.0.1:1", "--namespace", "n"},
		{"store", "stats", "--data-dir", "d", "extra"},
	} {
		var out bytes.Buffer
		if err := run(t.Context(), args, &out, &out); exitCode(err) != 2 {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestStorePurge: the dry run lists the finished task past the window and
// changes nothing; --yes deletes it with its unshared blob and marks its
// ledger entry; the kept tasks stay; stats count before and after.
func TestStorePurge(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	arts, err := artifacts.NewStore(filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	digest, _, err := arts.PutRaw(ctx, strings.NewReader("blob of the old task"), 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	owner := tasks.Owner{Principal: "p"}
	put := func(id string, state a2a.TaskState, at time.Time, parts ...*a2a.Part) {
		task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state}}
		if len(parts) > 0 {
			task.Artifacts = []*a2a.Artifact{{ID: "a", Parts: parts}}
		}
		if err := s.Append(ctx, &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: at}, []a2a.Event{task}); err != nil {
			t.Fatal(err)
		}
	}
	blob := a2a.NewTextPart("see the blob")
	blob.Metadata = map[string]any{"handoff/blob": map[string]any{"digest": digest}}
	now := time.Now()
	put("old", a2a.TaskStateCompleted, now.Add(-2*time.Hour), blob)
	put("recent", a2a.TaskStateCompleted, now.Add(-time.Minute))
	put("old-working", a2a.TaskStateWorking, now.Add(-2*time.Hour))
	// Held by this process, the store is refused, with the reason.
	var out bytes.Buffer
	err = run(ctx, []string{"store", "purge", "--older-than", "1h", "--data-dir", dir, "--yes"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "is running") {
		t.Errorf("purge of a held store: %v, want it refused as running", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := acceptance.OpenBoltLedger(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(ctx, &acceptance.Entry{DelegationID: "old", Skill: "s", CommittedAt: now.Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	stats := func() string {
		t.Helper()
		var out bytes.Buffer
		if err := run(ctx, []string{"store", "stats", "--data-dir", dir}, &out, &out); err != nil {
			t.Fatalf("store stats: %v", err)
		}
		return out.String()
	}
	if got := stats(); !strings.Contains(got, "tasks: 3") || !strings.Contains(got, "TASK_STATE_COMPLETED  2") || !strings.Contains(got, "last purge: never") {
		t.Errorf("stats before:\n%s", got)
	}
	out.Reset()
	if err := run(ctx, []string{"store", "purge", "--older-than", "1h", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := out.String(); !strings.Contains(got, "old  ") || strings.Contains(got, "recent") || strings.Contains(got, "old-working") ||
		!strings.Contains(got, "dry run: 1 finished tasks") {
		t.Errorf("dry run:\n%s", got)
	}
	if got := stats(); !strings.Contains(got, "tasks: 3") {
		t.Errorf("the dry run changed the store:\n%s", got)
	}
	out.Reset()
	if err := run(ctx, []string{"store", "purge", "--older-than", "1h", "--data-dir", dir, "--yes"}, &out, &out); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if got := out.String(); !strings.Contains(got, "deleted 1 finished tasks older than 1h0m0s, and 1 blobs") {
		t.Errorf("purge:\n%s", got)
	}
	if got := stats(); !strings.Contains(got, "tasks: 2") || !strings.Contains(got, "1 tasks (1 purged in all)") {
		t.Errorf("stats after:\n%s", got)
	}
	if _, err := arts.OpenRaw(digest); !errors.Is(err, artifacts.ErrNotFound) {
		t.Errorf("the purged task's blob: %v, want it gone", err)
	}
	if l, err = acceptance.OpenBoltLedger(filepath.Join(dir, "ledger.db")); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if e, err := l.Get(ctx, "old"); err != nil || e.TaskPurgedAt.IsZero() {
		t.Errorf("ledger entry of the purged task: %+v, %v; want it kept and marked", e, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tasks.db")); err != nil {
		t.Fatal(err)
	}
}
