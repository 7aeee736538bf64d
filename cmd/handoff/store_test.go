package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// storeWithTask makes a stopped store in dir holding one task.
func storeWithTask(t *testing.T, dir string) {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	snap := &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: "p"}, Version: 1, Updated: time.Now()}
	if err := s.Append(t.Context(), snap, []a2a.Event{task}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStoreRecoverHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"store", "recover", "--help"}, &out, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, want := range []string{"--data-dir DIR", "--apply", "dry run", "nothing on disk changes", "versions lost"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestStoreRecoverUsage(t *testing.T) {
	for _, args := range [][]string{{"store"}, {"store", "fix"}, {"store", "recover"}, {"store", "recover", "--data-dir", "d", "extra"}} {
		var out bytes.Buffer
		err := run(t.Context(), args, &out, &out)
		if exitCode(err) != 2 {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestStoreRecoverWhole: a store without a log, or with a whole one, has
// nothing to drop; the dry run says so and --json reports it.
func TestStoreRecoverWhole(t *testing.T) {
	dir := t.TempDir()
	storeWithTask(t, dir)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"store", "recover", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the log is whole: nothing to drop") {
		t.Fatalf("dry run of a whole store:\n%s", out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"store", "recover", "--data-dir", dir, "--json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var r boltstore.Recovery
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || !r.Lossless() || r.Written || r.Applied == 0 {
		t.Fatalf("--json of a whole store: %v\n%s", err, out.String())
	}
}

// TestStoreRecoverRefusesDamagedFile: recover cannot mend tasks.db itself;
// it says so, naming the file.
func TestStoreRecoverRefusesDamagedFile(t *testing.T) {
	dir := t.TempDir()
	storeWithTask(t, dir)
	if err := os.Truncate(filepath.Join(dir, "tasks.db"), 5000); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"store", "recover", "--data-dir", dir, "--apply"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "tasks.db is damaged") {
		t.Fatalf("recover of a truncated tasks.db: %v", err)
	}
}

// TestStoreRecoverNoStore: a directory without a task store is not made
// one, even when it holds other agent data (TestDataDirRefused has the
// directory without any).
func TestStoreRecoverNoStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ledger.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"store", "recover", "--data-dir", dir, "--apply"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no task store in") {
		t.Fatalf("recover of a directory without a task store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tasks.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("recover made a store file in an empty directory: %v", err)
	}
}

// TestStoreRecoverRunningAgent: a store another process holds open is not
// touched.
func TestStoreRecoverRunningAgent(t *testing.T) {
	dir := t.TempDir()
	s, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out bytes.Buffer
	err = run(t.Context(), []string{"store", "recover", "--data-dir", dir}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "is running: stop it first") {
		t.Fatalf("recover of a store in use: %v", err)
	}
}

// TestWriteRecovery: the report names each damaged part of the log and
// each task that loses versions, and says whether anything was written.
func TestWriteRecovery(t *testing.T) {
	r := &boltstore.Recovery{Applied: 10, Replay: 3,
		Tasks: []boltstore.RecoveredTask{{ID: "gone", Lost: []uint64{2}}, {ID: "kept", LastGood: 4, Lost: []uint64{5, 6}}},
		Damage: []boltstore.LogDamage{
			{File: "/d/tasks.db.wal-1", Offset: 400, Bytes: 90, From: 12, To: 12},
			{File: "/d/tasks.db.wal-9", From: 13, To: 20, Missing: true},
			{File: "/d/tasks.db.wal-9", Offset: 7000, Bytes: 300, From: 31, Torn: true},
		}}
	var out bytes.Buffer
	if err := writeRecovery(&out, "/d/tasks.db", r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"it holds log records up to 10; 3 more to apply",
		"/d/tasks.db.wal-1 offset 400: 90 bytes cannot be read (log record 12)",
		"/d/tasks.db.wal-9 offset 0: log records 13 to 20 are missing",
		"/d/tasks.db.wal-9 offset 7000: 300 bytes, the end of a write a crash cut short (log records from 31 on",
		"gone  none (the task is gone)  2",
		"kept  4                        5, 6",
		"dry run: nothing was changed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
	r.Written = true
	out.Reset()
	writeRecovery(&out, "/d/tasks.db", r)
	if !strings.Contains(out.String(), "recovered: 3 records applied") {
		t.Fatalf("report of an applied recovery:\n%s", out.String())
	}
}
