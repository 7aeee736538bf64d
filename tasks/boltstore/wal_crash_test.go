package boltstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// crashChildEnv names the store the child of TestBoltCrash writes to.
const crashChildEnv = "HANDOFF_TASKS_CRASH_CHILD"

// TestBoltCrash kills a process with kill -9 while it appends as fast as it
// can, its writes acknowledged line by line on stdout, then opens its
// store: every acknowledged write is there, with its events, though bbolt
// itself did not have all of them (the log did). A kill that lands just
// after bbolt caught up (about one in a thousand) tests nothing, so the
// crash is tried again then, up to three times.
func TestBoltCrash(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	var (
		path   string
		acked  map[string]uint64
		behind int
	)
	for range 3 {
		if path, acked, behind = crashOnce(t); behind > 0 {
			break
		}
	}
	if behind == 0 {
		t.Fatal("bbolt had every acknowledged task at each of three kills: the log was never tested")
	}

	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	owner := tasks.Owner{Principal: "crash"}
	for id, version := range acked {
		snap, err := s.Get(t.Context(), owner, a2a.TaskID(id))
		if err != nil {
			t.Fatalf("acknowledged task %s: %v", id, err)
		}
		if snap.Version < version {
			t.Fatalf("task %s: version %d, acknowledged %d", id, snap.Version, version)
		}
		evs, err := s.Events(t.Context(), owner, a2a.TaskID(id), 0)
		if err != nil || uint64(len(evs)) != snap.Version {
			t.Fatalf("task %s: %d events for version %d, %v", id, len(evs), snap.Version, err)
		}
	}
	if left, _ := filepath.Glob(path + ".wal-*"); len(left) != 0 {
		t.Fatalf("log left after replay: %v", left)
	}
	t.Logf("%d acknowledged tasks, %d of them only in the log at the kill", len(acked), behind)
}

// crashOnce runs the child until it has acknowledged 3000 tasks, kills it,
// and returns its store, what it acknowledged, and how many of those bbolt
// itself did not have.
func crashOnce(t *testing.T) (path string, acked map[string]uint64, behind int) {
	path = filepath.Join(t.TempDir(), "tasks.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoltCrash$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked = map[string]uint64{}
	lines := bufio.NewScanner(out)
	deadline := time.Now().Add(30 * time.Second)
	for len(acked) < 3000 && time.Now().Before(deadline) && lines.Scan() {
		recordAck(t, acked, lines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() { // acknowledged before the kill, still in the pipe
		recordAck(t, acked, lines.Text())
	}
	cmd.Wait()
	if len(acked) < 3000 {
		t.Fatalf("the child acknowledged only %d tasks", len(acked))
	}
	if segments, _ := filepath.Glob(path + ".wal-*"); len(segments) == 0 {
		t.Fatal("no log left by the killed process")
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(tx *bolt.Tx) error {
		tasksB := tx.Bucket([]byte("tasks"))
		for id := range acked {
			if tasksB.Get([]byte(id)) == nil {
				behind++
			}
		}
		return nil
	})
	return path, acked, behind
}

func recordAck(t *testing.T, acked map[string]uint64, line string) {
	id, v, ok := strings.Cut(line, " ")
	n, err := strconv.ParseUint(v, 10, 64)
	if !ok || err != nil {
		t.Fatalf("child wrote %q", line)
	}
	acked[id] = max(acked[id], n)
}

// crashChild creates tasks, submitted then completed, on eight goroutines
// until killed, printing each acknowledged write.
func crashChild(path string) {
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	acks := make(chan string, 1024)
	for g := range 8 {
		go func() {
			owner := tasks.Owner{Principal: "crash"}
			for i := 0; ; i++ {
				id := a2a.TaskID(fmt.Sprintf("g%d-%d", g, i))
				task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
					History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("crash me"))}}
				first := &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Now()}
				if err := s.Append(context.Background(), first, []a2a.Event{task}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				acks <- fmt.Sprintf("%s 1", id)
				done := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
				next := *task
				next.Status = done.Status
				second := &tasks.Snapshot{Task: &next, Owner: owner, Version: 2, Updated: time.Now()}
				if err := s.Append(context.Background(), second, []a2a.Event{done}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				acks <- fmt.Sprintf("%s 2", id)
			}
		}()
	}
	w := bufio.NewWriter(os.Stdout)
	for line := range acks {
		fmt.Fprintln(w, line)
		if len(acks) == 0 {
			w.Flush()
		}
	}
}
