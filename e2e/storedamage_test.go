package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// These tests damage the embedded store's files on disk behind a real
// handoff serve (issue 14, item 2). The data directory is a small tmpfs:
// filling it for real (ENOSPC) keeps bbolt from applying the log, so the
// tasks acknowledged then are in the log only, where the damage is done
// after a kill -9. Mounting needs root (CAP_SYS_ADMIN), as the project's
// test machine has.

// smallDisk mounts a tmpfs of size bytes as a data directory.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a %d-byte tmpfs for a real ENOSPC (needs root): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// waitSpare waits until the log's next segment, made in the background
// after the first write, has taken its room on the disk: filling the disk
// before would fail it and free that room again.
func waitSpare(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(filepath.Join(dir, "tasks.db.wal.spare")); err == nil && fi.Size() == 16<<20 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the log's spare segment was not made within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline
	}
}

// fill writes a file in dir until the disk is full, and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{1}, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return p
		}
	}
}

// waitReadyz polls /readyz until it answers want, or fails the test.
func waitReadyz(t *testing.T, a *agent, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := readyz(t, a)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz answered %d for %s, want %d; log:\n%s", got, within, want, a.stderr.String())
		}
		time.Sleep(50 * time.Millisecond) // polling, with a deadline
	}
}

// marked is a message whose text holds a marker found in the log's bytes.
func marked(n, size int) (*a2a.Message, string) {
	mark := fmt.Sprintf("storedamage-%03d-%s", n, rand8())
	return userMessage(uniqueID("tck-complete-task"), mark+strings.Repeat(".", size)), mark
}

func rand8() string { return fmt.Sprintf("%08x", time.Now().UnixNano()&0xffffffff) }

// segmentsOf lists the task store's log segments in dir, oldest first.
func segmentsOf(t *testing.T, dir string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "tasks.db.wal-*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	return segs
}

// stalledTasks runs an agent on a small disk, sends one task while bbolt
// can apply, then fills the disk and sends n more of size bytes each: they
// are acknowledged into the log, which has its room made, while bbolt
// cannot apply them. It kills the agent with kill -9, frees the disk, and
// returns the data directory, every acknowledged task as the agent
// answered GetTask before the kill, and the markers of the n.
func stalledTasks(t *testing.T, n, size int) (string, []*a2a.Task, []string) {
	t.Helper()
	dir := smallDisk(t, 48<<20)
	ag := startAgent(t, agentConfig{dataDir: dir})
	c := jsonrpcClient(t, ag)
	first, _ := marked(0, 10)
	acked := []*a2a.Task{sendTask(t, c, &a2a.SendMessageRequest{Message: first})}
	// A list reads bbolt once it has every acknowledged write: the first
	// task is applied before the disk fills.
	if _, err := c.ListTasks(callCtx(t), &a2a.ListTasksRequest{}); err != nil {
		t.Fatalf("ListTasks: %v", err)
	}
	waitSpare(t, dir)
	filler := fill(t, dir)
	var marks []string
	for i := 1; i <= n; i++ {
		msg, mark := marked(i, size)
		acked = append(acked, sendTask(t, c, &a2a.SendMessageRequest{Message: msg}))
		marks = append(marks, mark)
	}
	waitReadyz(t, ag, http.StatusServiceUnavailable, 10*time.Second) // bbolt cannot apply them
	for i, task := range acked {
		acked[i] = getTask(t, c, task.ID)
	}
	ag.kill9()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	return dir, acked, marks
}

// wantRefusal starts an agent on dir and wants it to exit non-zero before
// it is ever ready, with a message naming file and an offset.
func wantRefusal(t *testing.T, dir, file string) string {
	t.Helper()
	a := launch(t, "agent on a damaged store", writeConfig(t, agentConfig{dataDir: dir}), freeAddr(t), dir)
	select {
	case <-a.exited:
	case <-time.After(readyTimeout):
		t.Fatalf("agent on a damaged store still running after %s (readyz %d); log:\n%s", readyTimeout, readyz(t, a), a.stderr.String())
	}
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	out := a.stderr.String()
	t.Logf("refused: %s", out)
	if a.state.ExitCode() == 0 {
		t.Fatalf("agent on a damaged store exited 0; log:\n%s", out)
	}
	if !strings.Contains(out, file) || !strings.Contains(out, "offset") || !strings.Contains(out, "handoff store recover") {
		t.Fatalf("refusal does not name %s and an offset, or the way to recover; log:\n%s", file, out)
	}
	return out
}

// wantSame fails unless the agent at c returns each task as before.
func wantSame(t *testing.T, c *a2aclient.Client, tasks []*a2a.Task) {
	t.Helper()
	for _, task := range tasks {
		if got, want := asJSON(t, getTask(t, c, task.ID)), asJSON(t, task); got != want {
			t.Fatalf("task %s after the restart:\n got %s\nwant %s", task.ID, got, want)
		}
	}
}

// TestStoreDiskFull fills the agent's disk: writes fail and /readyz says
// so; once space is freed /readyz is 200 again without a restart, every
// acknowledged task is there, and new tasks go in.
func TestStoreDiskFull(t *testing.T) {
	// Room for the log's two segments (32 MiB), what bbolt needs to apply
	// them once the disk has room again, and the filler.
	dir := smallDisk(t, 112<<20)
	ag := startAgent(t, agentConfig{dataDir: dir})
	c := jsonrpcClient(t, ag)
	var acked []*a2a.Task
	msg, _ := marked(0, 10)
	acked = append(acked, sendTask(t, c, &a2a.SendMessageRequest{Message: msg}))
	waitSpare(t, dir)
	filler := fill(t, dir)
	var failed error
	for i := 1; i < 200 && failed == nil; i++ {
		msg, _ := marked(i, 256<<10)
		var res a2a.SendMessageResult
		res, failed = c.SendMessage(callCtx(t), &a2a.SendMessageRequest{Message: msg})
		if task, ok := res.(*a2a.Task); failed == nil && ok {
			acked = append(acked, task)
		}
	}
	if failed == nil {
		t.Fatal("200 sends of 256 KiB to a full disk all succeeded")
	}
	t.Logf("%d tasks acknowledged; then, on the full disk: %v", len(acked), failed)
	// A task whose first write was stored and whose next one found the disk
	// full is named in the answer, and must go on once there is room.
	if m := regexp.MustCompile(`store task (\S+)'s progress: its task store is full`).FindStringSubmatch(failed.Error()); m != nil {
		t.Logf("task %s was stored and then kept waiting for room", m[1])
		acked = append(acked, &a2a.Task{ID: a2a.TaskID(m[1])})
	}
	waitReadyz(t, ag, http.StatusServiceUnavailable, 10*time.Second)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReadyz(t, ag, http.StatusOK, 15*time.Second)
	for _, task := range acked {
		wantState(t, "acknowledged task after the disk had room again", getTask(t, c, task.ID), a2a.TaskStateCompleted)
	}
	msg, _ = marked(999, 10)
	wantState(t, "task sent after the disk had room again", sendTask(t, c, &a2a.SendMessageRequest{Message: msg}), a2a.TaskStateCompleted)
}

// TestStoreTornTail truncates the last log segment inside its last record,
// as a write cut short leaves it: the agent starts, says in its log how
// many bytes it dropped from which file, and has every acknowledged task
// but the one of that last write as before.
func TestStoreTornTail(t *testing.T) {
	dir, acked, _ := stalledTasks(t, 4, 100_000)
	segs := segmentsOf(t, dir)
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	end := len(bytes.TrimRight(b, "\x00"))
	if err := os.Truncate(last, int64(end-7)); err != nil {
		t.Fatal(err)
	}
	ag := startAgent(t, agentConfig{dataDir: dir})
	waitReadyz(t, ag, http.StatusOK, readyTimeout)
	if out := ag.stderr.String(); !strings.Contains(out, "dropped the end of a write a crash cut short") || !strings.Contains(out, last) || !strings.Contains(out, "bytes=") {
		t.Fatalf("no warning naming %s and the bytes dropped; log:\n%s", last, out)
	}
	wantSame(t, jsonrpcClient(t, ag), acked[:len(acked)-1])
}

// TestStoreFlippedByte flips one byte in the middle of the log, in the
// first record of an acknowledged task followed by the records of later
// ones: the agent refuses to start, naming the segment and the offset;
// handoff store recover reports the task and, with --apply, makes the
// store start without it.
func TestStoreFlippedByte(t *testing.T) {
	dir, acked, marks := stalledTasks(t, 4, 100_000)
	segs := segmentsOf(t, dir)
	last := segs[len(segs)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Index(b, []byte(marks[1]))
	if off < 0 {
		t.Fatalf("task 2's marker is not in %s", last)
	}
	b[off+len(marks[1])+100] ^= 0x20
	if err := os.WriteFile(last, b, 0o600); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, dir, last)

	out := runHandoff(t, "store", "recover", "--data-dir", dir)
	t.Logf("handoff store recover:\n%s", out)
	if !strings.Contains(out, "dry run") || !strings.Contains(out, last) || !strings.Contains(out, string(acked[2].ID)) {
		t.Fatalf("handoff store recover (dry run) does not name %s and task %s:\n%s", last, acked[2].ID, out)
	}
	wantRefusal(t, dir, last) // the dry run changed nothing
	if out := runHandoff(t, "store", "recover", "--data-dir", dir, "--apply"); !strings.Contains(out, "recovered") {
		t.Fatalf("handoff store recover --apply:\n%s", out)
	}
	ag := startAgent(t, agentConfig{dataDir: dir})
	waitReadyz(t, ag, http.StatusOK, readyTimeout)
	c := jsonrpcClient(t, ag)
	wantSame(t, c, acked[:2])
	wantSame(t, c, acked[3:])
}

// TestStoreMissingSegment deletes the oldest of two log segments, both
// holding acknowledged tasks bbolt lacks: the agent refuses to start,
// naming the segment that now starts the log; recover --apply makes it
// start with the tasks of the remaining segment.
func TestStoreMissingSegment(t *testing.T) {
	dir, acked, _ := stalledTasks(t, 8, 1<<20) // about 2.5 MiB of log each: two segments
	segs := segmentsOf(t, dir)
	if len(segs) != 2 {
		t.Fatalf("%d log segments, want 2: %v", len(segs), segs)
	}
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, dir, segs[1])
	out := runHandoff(t, "store", "recover", "--data-dir", dir)
	t.Logf("handoff store recover:\n%s", out)
	if !strings.Contains(out, "missing") {
		t.Fatalf("handoff store recover (dry run) does not report the missing records:\n%s", out)
	}
	if out := runHandoff(t, "store", "recover", "--data-dir", dir, "--apply"); !strings.Contains(out, "recovered") {
		t.Fatalf("handoff store recover --apply:\n%s", out)
	}
	ag := startAgent(t, agentConfig{dataDir: dir})
	waitReadyz(t, ag, http.StatusOK, readyTimeout)
	wantSame(t, jsonrpcClient(t, ag), acked[:1]) // in bbolt before the disk filled
}

// TestStoreTruncatedFile cuts tasks.db in half: the agent refuses to start
// with an error naming the file, not a crash.
func TestStoreTruncatedFile(t *testing.T) {
	dir := t.TempDir()
	ag := startAgent(t, agentConfig{dataDir: dir})
	c := jsonrpcClient(t, ag)
	for i := range 30 {
		msg, _ := marked(i, 20000)
		sendTask(t, c, &a2a.SendMessageRequest{Message: msg})
	}
	if code := ag.stop(os.Interrupt); code != 0 {
		t.Fatalf("agent exited %d after SIGINT", code)
	}
	db := filepath.Join(dir, "tasks.db")
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(db, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	a := launch(t, "agent on a truncated tasks.db", writeConfig(t, agentConfig{dataDir: dir}), freeAddr(t), dir)
	select {
	case <-a.exited:
	case <-time.After(readyTimeout):
		t.Fatalf("agent on a truncated tasks.db still running; log:\n%s", a.stderr.String())
	}
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	out := a.stderr.String()
	if a.state.ExitCode() != 1 || !strings.Contains(out, "tasks.db is damaged") || strings.Contains(out, "goroutine") || strings.Contains(out, "SIG") {
		t.Fatalf("agent on a truncated tasks.db: exit %d, want 1 with \"tasks.db is damaged\" and no crash; log:\n%s", a.state.ExitCode(), out)
	}
}
