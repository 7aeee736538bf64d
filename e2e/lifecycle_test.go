package e2e

import (
	"strings"
	"syscall"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestGracefulShutdownEndsOpenStream sends SIGTERM while a stream watches a
// task that would run for 10 s. With shutdown_grace 1s the agent fails the
// task, the stream receives that failed status as its last event and ends
// cleanly, and the process exits 0. The failure is stored: a restart on the
// same data dir returns it.
func TestGracefulShutdownEndsOpenStream(t *testing.T) {
	dataDir := t.TempDir()
	ag := startAgent(t, agentConfig{dataDir: dataDir})
	c := jsonrpcClient(t, ag)

	sent := userMessage(uniqueID("test-resubscribe-message-id"), "long")
	s := openStream(t, "stream open at SIGTERM", c.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{Message: sent}))
	task := wantTaskEvent(t, "event 0", s.read(), "", a2a.TaskStateSubmitted)
	s.readUntilWorking()

	// Signal from a goroutine: the stream must be read while the agent
	// drains, or its final event could not be delivered.
	type exit struct {
		code int
		err  error
	}
	exited := make(chan exit, 1)
	go func() {
		code, err := ag.signal(syscall.SIGTERM)
		exited <- exit{code, err}
	}()

	evs := s.readToEnd()
	final := wantStatusEvent(t, "last event after SIGTERM", evs[len(evs)-1], task.ID, a2a.TaskStateFailed)
	if msg := statusText(final.Status); !strings.Contains(msg, "shut down") {
		t.Fatalf("failed status message = %q, want it to say the agent shut down", msg)
	}
	if len(evs) != 3 {
		t.Fatalf("stream got %d events, want 3 (task, working, failed): %v", len(evs), eventsJSON(t, evs))
	}
	if e := <-exited; e.err != nil || e.code != 0 {
		t.Errorf("exit after SIGTERM = code %d, error %v; want code 0 (graceful shutdown)%s", e.code, e.err, ag.exitReason(e.code))
	}

	again := startAgent(t, agentConfig{dataDir: dataDir})
	stored := getTask(t, jsonrpcClient(t, again), task.ID)
	wantState(t, "task after the restart", stored, a2a.TaskStateFailed)
	if asJSON(t, stored.Status) != asJSON(t, final.Status) {
		t.Fatalf("stored status = %s, want the streamed %s", asJSON(t, stored.Status), asJSON(t, final.Status))
	}
}

// TestTasksSurviveKill9 kills the process without warning. Every task the
// agent acknowledged before is returned whole after a restart on the same
// data dir; the task that was running at the kill ends failed, saying the
// agent restarted.
func TestTasksSurviveKill9(t *testing.T) {
	dataDir := t.TempDir()
	ag := startAgent(t, agentConfig{dataDir: dataDir})
	c := jsonrpcClient(t, ag)

	var acknowledged []*a2a.Task
	for _, prefix := range []string{"tck-complete-task", "tck-artifact-text", "tck-input-required", "tck-reject-task"} {
		acknowledged = append(acknowledged, sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID(prefix), prefix)}))
	}
	// A continued task: two messages, the question moved into the history.
	answer := userMessage(a2a.NewMessageID(), "the answer")
	answer.TaskID = acknowledged[2].ID
	continued := sendTask(t, c, &a2a.SendMessageRequest{Message: answer})
	wantState(t, "continued task", continued, a2a.TaskStateCompleted)
	if len(continued.History) < 3 {
		t.Fatalf("continued task history has %d messages, want the first message, the question and the answer: %s", len(continued.History), asJSON(t, continued.History))
	}
	acknowledged[2] = continued
	// A streamed one, with artifact events in its log.
	streamed, err := collect(c.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-stream-artifact-chunked"), "chunks")}))
	if err != nil || len(streamed) == 0 {
		t.Fatalf("stream tck-stream-artifact-chunked: %v, %d events", err, len(streamed))
	}
	acknowledged = append(acknowledged, getTask(t, c, streamed[0].TaskInfo().TaskID))

	sentRunning := userMessage(uniqueID("test-resubscribe-message-id"), "running at the kill")
	s := openStream(t, "stream of the running task", c.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{Message: sentRunning}))
	running := wantTaskEvent(t, "running task event 0", s.read(), "", a2a.TaskStateSubmitted)
	s.readUntilWorking() // streams read the log: working is stored

	before := make([]string, len(acknowledged))
	for i, task := range acknowledged {
		before[i] = asJSON(t, getTask(t, c, task.ID))
	}

	ag.kill9()
	s.close()

	again := startAgent(t, agentConfig{dataDir: dataDir})
	c2 := jsonrpcClient(t, again)
	for i, task := range acknowledged {
		if got := asJSON(t, getTask(t, c2, task.ID)); got != before[i] {
			t.Errorf("task %s after kill -9 and restart:\n got %s\nwant %s", task.ID, got, before[i])
		}
	}

	lost := getTask(t, c2, running.ID)
	wantState(t, "task running at the kill", lost, a2a.TaskStateFailed)
	if msg := statusText(lost.Status); lost.Status.Message.Role != a2a.MessageRoleAgent || !strings.Contains(msg, "restarted") {
		t.Fatalf("failed status message = %q, want an agent message saying the agent restarted", msg)
	}
	wantUserMessageInHistory(t, "task running at the kill", lost, sentRunning)

	// The restarted agent lists them all, and a subscription to the failed
	// task is refused as to any finished task.
	list, err := c2.ListTasks(callCtx(t), &a2a.ListTasksRequest{PageSize: 100})
	if err != nil {
		t.Fatalf("ListTasks after restart: %v", err)
	}
	if list.TotalSize != len(acknowledged)+1 {
		t.Fatalf("ListTasks after restart: total %d, want %d", list.TotalSize, len(acknowledged)+1)
	}
	if _, err := collect(c2.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: running.ID})); err == nil {
		t.Fatalf("SubscribeToTask of the failed task succeeded, want an error (the task is finished)")
	}
}
