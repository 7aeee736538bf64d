package tasks_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// lifecycleLog records what a LifecycleObserver is told, one line a call.
type lifecycleLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lifecycleLog) add(what string, s *tasks.Snapshot, state a2a.TaskState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s %s %s", what, s.Task.ID, state, s.Owner.Principal))
}

func (l *lifecycleLog) TaskCreated(s *tasks.Snapshot, state a2a.TaskState) {
	l.add("created", s, state)
}
func (l *lifecycleLog) TaskFinished(s *tasks.Snapshot) { l.add("finished", s, s.Task.Status.State) }

// of returns the lines about task id, without it.
func (l *lifecycleLog) of(id a2a.TaskID) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if what, rest, _ := strings.Cut(line, " "); strings.HasPrefix(rest, string(id)+" ") {
			out = append(out, what+" "+strings.TrimPrefix(rest, string(id)+" "))
		}
	}
	return out
}

// TestLifecycleObserver: each task is reported created once, at its first stored write, and
// finished once, at the write that ended it; a task that waits for input has not finished,
// a message without a task is no task, and a task failed by a restart finishes then.
func TestLifecycleObserver(t *testing.T) {
	log := &lifecycleLog{}
	e, _, _ := newEngine(t, t.TempDir(), tasks.WithLifecycleObserver(log))
	done, err := e.SendMessage(t.Context(), send("hi"))
	if err != nil {
		t.Fatal(err)
	}
	asked, err := e.SendMessage(t.Context(), send("ask"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SendMessage(t.Context(), send("message")); err != nil {
		t.Fatal(err)
	}
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	waiting, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: waiting.(*a2a.Task).ID}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   a2a.TaskID
		want string
	}{
		{done.(*a2a.Task).ID, "created TASK_STATE_SUBMITTED anonymous|finished TASK_STATE_COMPLETED anonymous"},
		{asked.(*a2a.Task).ID, "created TASK_STATE_SUBMITTED anonymous"},
		{waiting.(*a2a.Task).ID, "created TASK_STATE_SUBMITTED anonymous|finished TASK_STATE_CANCELED anonymous"},
	} {
		waitFor(t, func() bool { return strings.Join(log.of(tc.id), "|") == tc.want }, func() string {
			return fmt.Sprintf("task %s: %q, want %q", tc.id, log.of(tc.id), tc.want)
		})
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if got := len(log.lines); got != 5 {
		t.Errorf("%d calls, want 5 (the direct message is no task): %q", got, log.lines)
	}

}

// TestLifecycleObserverRestart: a task that died with its process is reported finished,
// failed, when the next engine fails it at its start.
func TestLifecycleObserverRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := &scriptExec{release: make(chan struct{})}
	e, err := tasks.NewEngine(t.Context(), st, x)
	if err != nil {
		t.Fatal(err)
	}
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	st.Close() // the process "dies": nothing more is written
	close(x.release)

	log := &lifecycleLog{}
	newEngine(t, dir, tasks.WithLifecycleObserver(log))
	if got := log.of(id); len(got) != 1 || got[0] != "finished TASK_STATE_FAILED anonymous" {
		t.Errorf("after the restart: %q, want the task finished failed", got)
	}
}

// waitFor polls ok for up to 5s, then fails t with what says.
func waitFor(t *testing.T, ok func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
