package e2e

import (
	"encoding/json"
	"iter"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// launch starts `handoff serve` with the config file, on addr and dataDir,
// and returns without waiting for it to be ready. Unless the test stops or
// kills it, cleanup stops it with SIGINT and requires a graceful exit (code
// 0); a process still running then is killed, as it would outlive the test
// binary. name labels its errors and, when the test failed, its log.
func launch(t *testing.T, name, config, addr, dataDir string) *agent {
	t.Helper()
	return launchEnv(t, name, config, addr, dataDir, nil)
}

// launchEnv is launch with env (NAME=VALUE) added to the test's environment.
func launchEnv(t *testing.T, name, config, addr, dataDir string, env []string) *agent {
	t.Helper()
	a := &agent{t: t, dataDir: dataDir, addr: addr, base: "http://" + addr, stderr: &syncBuffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(handoffBin, "serve", "--config", config, "--listen", addr, "--data-dir", dataDir)
	if env != nil {
		a.cmd.Env = append(os.Environ(), env...)
	}
	a.cmd.Stdout, a.cmd.Stderr = a.stderr, a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = a.cmd.Wait()
		a.state = a.cmd.ProcessState
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.mu.Lock()
		stopped := a.stopped
		a.mu.Unlock()
		if !stopped {
			if code := a.stop(os.Interrupt); code != 0 {
				t.Errorf("%s exited with code %d after SIGINT, want 0 (graceful shutdown)%s", name, code, a.exitReason(code))
			}
		}
		select {
		case <-a.exited:
		default:
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		if t.Failed() {
			t.Logf("%s (%s) log:\n%s", name, addr, a.stderr.String())
		}
	})
	return a
}

// userMessage is a user text message with the given id (its prefix picks
// the conformance agent's behaviour).
func userMessage(id, text string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID = id
	return m
}

// sendTask sends msg blocking and requires a task back.
func sendTask(t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(callCtx(t), req)
	if err != nil {
		t.Fatalf("SendMessage(%s): %v", req.Message.ID, err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage(%s) = %T, want *a2a.Task", req.Message.ID, res)
	}
	if task.ID == "" || task.ContextID == "" {
		t.Fatalf("SendMessage(%s) task without ids: %s", req.Message.ID, asJSON(t, task))
	}
	return task
}

func getTask(t *testing.T, c *a2aclient.Client, id a2a.TaskID) *a2a.Task {
	t.Helper()
	task, err := c.GetTask(callCtx(t), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatalf("GetTask(%s): %v", id, err)
	}
	return task
}

// text joins the text parts of parts.
func text(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// statusText is the text of a status's message, "" without one.
func statusText(s a2a.TaskStatus) string {
	if s.Message == nil {
		return ""
	}
	return text(s.Message.Parts)
}

func wantState(t *testing.T, what string, task *a2a.Task, want a2a.TaskState) {
	t.Helper()
	if task.Status.State != want {
		t.Fatalf("%s: state = %s, want %s; task: %s", what, task.Status.State, want, asJSON(t, task))
	}
}

// wantStatusMessage requires an agent status message with exactly text.
func wantStatusMessage(t *testing.T, what string, s a2a.TaskStatus, want string) {
	t.Helper()
	if s.Message == nil {
		t.Fatalf("%s: status has no message, want %q", what, want)
	}
	if s.Message.Role != a2a.MessageRoleAgent || statusText(s) != want {
		t.Fatalf("%s: status message = %s %q, want agent %q", what, s.Message.Role, statusText(s), want)
	}
}

// wantUserMessageInHistory requires the message sent to be the task's first
// history entry.
func wantUserMessageInHistory(t *testing.T, what string, task *a2a.Task, sent *a2a.Message) {
	t.Helper()
	if len(task.History) == 0 {
		t.Fatalf("%s: empty history, want the message %s first", what, sent.ID)
	}
	h := task.History[0]
	if h.ID != sent.ID || h.Role != a2a.MessageRoleUser || text(h.Parts) != text(sent.Parts) {
		t.Fatalf("%s: history[0] = %s %s %q, want user message %s %q", what, h.ID, h.Role, text(h.Parts), sent.ID, text(sent.Parts))
	}
}

// asJSON renders v as JSON for messages and comparisons. Events render as
// the A2A StreamResponse wrapper, so their kind is part of the text.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	if ev, ok := v.(a2a.Event); ok {
		v = a2a.StreamResponse{Event: ev}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

func eventsJSON(t *testing.T, evs []a2a.Event) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = asJSON(t, ev)
	}
	return out
}

// collect reads a whole stream; an error ends it and is returned with the
// events before it.
func collect(seq iter.Seq2[a2a.Event, error]) ([]a2a.Event, error) {
	var evs []a2a.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// stream is a stream read one event at a time, so a test can act between
// events (subscribe, cancel, signal) and then read on.
type stream struct {
	t    *testing.T
	name string
	next func() (a2a.Event, error, bool)
	stop func()
	got  []a2a.Event
}

func openStream(t *testing.T, name string, seq iter.Seq2[a2a.Event, error]) *stream {
	t.Helper()
	next, stop := iter.Pull2(seq)
	s := &stream{t: t, name: name, next: next, stop: stop}
	t.Cleanup(stop)
	return s
}

// read returns the next event; it fails the test on an error or on the end.
func (s *stream) read() a2a.Event {
	s.t.Helper()
	ev, err, ok := s.next()
	if !ok {
		s.t.Fatalf("%s ended after %d events, want more: %v", s.name, len(s.got), eventsJSON(s.t, s.got))
	}
	if err != nil {
		s.t.Fatalf("%s failed after %d events: %v", s.name, len(s.got), err)
	}
	s.got = append(s.got, ev)
	return ev
}

// readUntilWorking reads until the task is known to be working: from a
// Task snapshot or a status update.
func (s *stream) readUntilWorking() {
	s.t.Helper()
	for {
		switch ev := s.read().(type) {
		case *a2a.Task:
			if ev.Status.State == a2a.TaskStateWorking {
				return
			}
		case *a2a.TaskStatusUpdateEvent:
			if ev.Status.State == a2a.TaskStateWorking {
				return
			}
		}
	}
}

// readToEnd reads the rest of the stream and requires it to end cleanly.
func (s *stream) readToEnd() []a2a.Event {
	s.t.Helper()
	for {
		ev, err, ok := s.next()
		if !ok {
			return s.got
		}
		if err != nil {
			s.t.Fatalf("%s failed after %d events %v: %v", s.name, len(s.got), eventsJSON(s.t, s.got), err)
		}
		s.got = append(s.got, ev)
	}
}

// close drops the stream (the client disconnects).
func (s *stream) close() { s.stop() }

// wantStatusEvent requires ev to be a status update to state for task id.
func wantStatusEvent(t *testing.T, what string, ev a2a.Event, id a2a.TaskID, state a2a.TaskState) *a2a.TaskStatusUpdateEvent {
	t.Helper()
	su, ok := ev.(*a2a.TaskStatusUpdateEvent)
	if !ok || su.TaskID != id || su.Status.State != state {
		t.Fatalf("%s = %s, want a status update of task %s to %s", what, asJSON(t, ev), id, state)
	}
	return su
}

// wantTaskEvent requires ev to be the task id in state.
func wantTaskEvent(t *testing.T, what string, ev a2a.Event, id a2a.TaskID, state a2a.TaskState) *a2a.Task {
	t.Helper()
	task, ok := ev.(*a2a.Task)
	if !ok || (id != "" && task.ID != id) || task.Status.State != state {
		t.Fatalf("%s = %s, want task %s in %s", what, asJSON(t, ev), id, state)
	}
	return task
}
