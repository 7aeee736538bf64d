package e2e

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestTransports drives the conformance agent with a2a-go's own clients on
// every binding: blocking send, stream, get, list, cancel and subscribe, each
// checked against the values the conformance behaviours promise.
func TestTransports(t *testing.T) {
	ag := startAgent(t, agentConfig{})
	card := fetchCard(t, ag)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			c := tr.connect(t, card)

			// Blocking send: the task comes back completed, with the fixed
			// status message and the sent message in its history.
			sent := userMessage(uniqueID("tck-complete-task"), "hello over "+tr.name)
			done := sendTask(t, c, &a2a.SendMessageRequest{Message: sent})
			wantState(t, "tck-complete-task", done, a2a.TaskStateCompleted)
			wantStatusMessage(t, "tck-complete-task", done.Status, "Hello from TCK")
			wantUserMessageInHistory(t, "tck-complete-task", done, sent)
			if done.History[0].TaskID != done.ID || done.History[0].ContextID != done.ContextID {
				t.Fatalf("history[0] ids = %s/%s, want the task's %s/%s", done.History[0].TaskID, done.History[0].ContextID, done.ID, done.ContextID)
			}

			// Get returns the same task the send answered.
			if got, want := asJSON(t, getTask(t, c, done.ID)), asJSON(t, done); got != want {
				t.Fatalf("GetTask after send:\n got %s\nwant %s", got, want)
			}

			// An artifact.
			art := sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-artifact-text"), "artifact please")})
			wantState(t, "tck-artifact-text", art, a2a.TaskStateCompleted)
			if len(art.Artifacts) != 1 || text(art.Artifacts[0].Parts) != "Generated text content" || art.Artifacts[0].ID == "" {
				t.Fatalf("tck-artifact-text artifacts = %s, want one artifact %q", asJSON(t, art.Artifacts), "Generated text content")
			}

			// Input required, then the answer on the same task completes it
			// with an echo.
			ask := sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-input-required"), "start")})
			wantState(t, "tck-input-required", ask, a2a.TaskStateInputRequired)
			wantStatusMessage(t, "tck-input-required", ask.Status, "Please provide input to continue")
			answer := userMessage(a2a.NewMessageID(), "the input")
			answer.TaskID, answer.ContextID = ask.ID, ask.ContextID
			answered := sendTask(t, c, &a2a.SendMessageRequest{Message: answer})
			if answered.ID != ask.ID {
				t.Fatalf("answer went to task %s, want %s", answered.ID, ask.ID)
			}
			wantState(t, "answer to tck-input-required", answered, a2a.TaskStateCompleted)
			wantStatusMessage(t, "answer to tck-input-required", answered.Status, "the input")

			// Stream: the task, working, the artifact, completed, all of one
			// task, then the stream ends.
			streamed := userMessage(uniqueID("tck-stream-001"), "stream please")
			evs, err := collect(c.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{Message: streamed}))
			if err != nil {
				t.Fatalf("SendStreamingMessage(tck-stream-001): %v after %v", err, eventsJSON(t, evs))
			}
			if len(evs) != 4 {
				t.Fatalf("tck-stream-001 got %d events, want 4 (task, working, artifact, completed): %v", len(evs), eventsJSON(t, evs))
			}
			first := wantTaskEvent(t, "stream event 0", evs[0], "", a2a.TaskStateSubmitted)
			wantUserMessageInHistory(t, "stream event 0", first, streamed)
			wantStatusEvent(t, "stream event 1", evs[1], first.ID, a2a.TaskStateWorking)
			if ae, ok := evs[2].(*a2a.TaskArtifactUpdateEvent); !ok || ae.TaskID != first.ID || text(ae.Artifact.Parts) != "Stream hello from TCK" {
				t.Fatalf("stream event 2 = %s, want artifact %q of task %s", asJSON(t, evs[2]), "Stream hello from TCK", first.ID)
			}
			wantStatusEvent(t, "stream event 3", evs[3], first.ID, a2a.TaskStateCompleted)
			for i, ev := range evs {
				if info := ev.TaskInfo(); info.TaskID != first.ID || info.ContextID != first.ContextID {
					t.Fatalf("stream event %d ids = %s/%s, want %s/%s", i, info.TaskID, info.ContextID, first.ID, first.ContextID)
				}
			}
			stored := getTask(t, c, first.ID)
			wantState(t, "GetTask after stream", stored, a2a.TaskStateCompleted)
			if len(stored.Artifacts) != 1 || text(stored.Artifacts[0].Parts) != "Stream hello from TCK" {
				t.Fatalf("GetTask after stream artifacts = %s, want the streamed one", asJSON(t, stored.Artifacts))
			}

			// List, filtered by the streamed task's context: that task only.
			if tr.hasList {
				list, err := c.ListTasks(callCtx(t), &a2a.ListTasksRequest{ContextID: first.ContextID, IncludeArtifacts: true})
				if err != nil {
					t.Fatalf("ListTasks: %v", err)
				}
				if len(list.Tasks) != 1 || list.TotalSize != 1 || list.Tasks[0].ID != first.ID ||
					list.Tasks[0].Status.State != a2a.TaskStateCompleted || len(list.Tasks[0].Artifacts) != 1 {
					t.Fatalf("ListTasks(context %s) = %s, want just task %s, completed, with its artifact", first.ContextID, asJSON(t, list), first.ID)
				}
				all, err := c.ListTasks(callCtx(t), &a2a.ListTasksRequest{Status: a2a.TaskStateInputRequired})
				if err != nil {
					t.Fatalf("ListTasks(input-required): %v", err)
				}
				for _, lt := range all.Tasks {
					if lt.Status.State != a2a.TaskStateInputRequired {
						t.Fatalf("ListTasks(input-required) returned task %s in %s", lt.ID, lt.Status.State)
					}
				}
			}

			// Subscribe to a long-running task, cancel it: the subscriber
			// sees the task, then the canceled status, then the end.
			long := sendTask(t, c, &a2a.SendMessageRequest{
				Message: userMessage(uniqueID("test-resubscribe-message-id"), "wait"),
				Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
			})
			if long.Status.State.Terminal() {
				t.Fatalf("test-resubscribe-message-id returned immediately in %s, want it still running", long.Status.State)
			}
			sub := openStream(t, "SubscribeToTask", c.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: long.ID}))
			snap, ok := sub.read().(*a2a.Task)
			if !ok || snap.ID != long.ID || (snap.Status.State != a2a.TaskStateSubmitted && snap.Status.State != a2a.TaskStateWorking) {
				t.Fatalf("subscription event 0 = %s, want task %s, submitted or working", asJSON(t, sub.got[0]), long.ID)
			}
			wantUserMessageInHistory(t, "subscription event 0", snap, long.History[0])
			// Wait for working so the cancel meets a running executor.
			if snap.Status.State != a2a.TaskStateWorking {
				sub.readUntilWorking()
			}
			canceled, err := c.CancelTask(callCtx(t), &a2a.CancelTaskRequest{ID: long.ID})
			if err != nil {
				t.Fatalf("CancelTask: %v", err)
			}
			wantState(t, "CancelTask", canceled, a2a.TaskStateCanceled)
			last := wantStatusEvent(t, "subscription's last event", sub.read(), long.ID, a2a.TaskStateCanceled)
			if rest := sub.readToEnd(); rest[len(rest)-1] != last {
				t.Fatalf("subscription went on after the canceled status: %v", eventsJSON(t, rest))
			}
			after := getTask(t, c, long.ID)
			wantState(t, "GetTask after cancel", after, a2a.TaskStateCanceled)
			if asJSON(t, after.Status) != asJSON(t, last.Status) {
				t.Fatalf("GetTask status after cancel = %s, want the streamed %s", asJSON(t, after.Status), asJSON(t, last.Status))
			}
		})
	}
}
