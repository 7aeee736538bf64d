package tck

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// describe names an event by kind and the fields the stream order is about.
func describe(ev a2a.Event) string {
	switch v := ev.(type) {
	case *a2a.Task:
		return taskEv(v.Status.State)
	case *a2a.TaskStatusUpdateEvent:
		return statusEv(v.Status.State)
	case *a2a.TaskArtifactUpdateEvent:
		return artifactEv(v.Append, v.LastChunk)
	case *a2a.Message:
		return "message"
	default:
		return fmt.Sprintf("unexpected %T", ev)
	}
}

func taskEv(s a2a.TaskState) string   { return "task " + string(s) }
func statusEv(s a2a.TaskState) string { return "status " + string(s) }
func artifactEv(appendChunk, last bool) string {
	return fmt.Sprintf("artifact append=%t last=%t", appendChunk, last)
}

// TestStreamOrder checks the exact event sequence each streaming prefix
// produces, the artifact content on the wire, that every event names the
// task, and what the store holds once the stream ends.
func TestStreamOrder(t *testing.T) {
	client := serve(t, New())
	var (
		submitted = taskEv(a2a.TaskStateSubmitted)
		working   = statusEv(a2a.TaskStateWorking)
		completed = statusEv(a2a.TaskStateCompleted)
		artifact  = artifactEv(false, false)
	)
	lifecycle := []string{submitted, working, artifact, completed}
	tests := []struct {
		prefix string
		events []string
		// parts are the parts of each artifact event, in order.
		parts [][]*a2a.Part
		// stored are the task's artifacts afterwards; nil means same as parts.
		stored [][]*a2a.Part
	}{
		{prefix: "tck-stream-001", events: lifecycle, parts: [][]*a2a.Part{{textPart("Stream hello from TCK")}}},
		{prefix: "tck-stream-002", events: []string{submitted, completed}},
		{prefix: "tck-stream-003", events: lifecycle, parts: [][]*a2a.Part{{textPart("Stream task lifecycle")}}},
		{prefix: "tck-stream-ordering-001", events: lifecycle, parts: [][]*a2a.Part{{textPart("Ordered output")}}},
		{prefix: "tck-stream-artifact-text", events: lifecycle, parts: [][]*a2a.Part{{textPart("Streamed text content")}}},
		{prefix: "tck-stream-artifact-file", events: lifecycle, parts: [][]*a2a.Part{{wantFilePart()}}},
		{
			prefix: "tck-stream-artifact-chunked",
			events: []string{submitted, working, artifact, artifactEv(true, true), completed},
			parts:  [][]*a2a.Part{{textPart("chunk-1 ")}, {textPart("chunk-2")}},
			// Appending to the same artifact id merges the chunks.
			stored: [][]*a2a.Part{{textPart("chunk-1 "), textPart("chunk-2")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			var events []a2a.Event
			for ev, err := range client.SendStreamingMessage(ctx, send(tt.prefix)) {
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				events = append(events, ev)
			}

			var got []string
			for _, ev := range events {
				got = append(got, describe(ev))
			}
			if !reflect.DeepEqual(got, tt.events) {
				t.Fatalf("events = %q, want %q", got, tt.events)
			}

			task := events[0].(*a2a.Task)
			var parts [][]*a2a.Part
			for _, ev := range events {
				if info := ev.TaskInfo(); info.TaskID != task.ID || info.ContextID != task.ContextID {
					t.Errorf("%s ids = (%q, %q), want (%q, %q)", describe(ev), info.TaskID, info.ContextID, task.ID, task.ContextID)
				}
				if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
					parts = append(parts, a.Artifact.Parts)
				}
			}
			if !reflect.DeepEqual(parts, tt.parts) {
				t.Errorf("artifact parts = %s, want %s", show(parts), show(tt.parts))
			}

			stored, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatalf("GetTask: %v", err)
			}
			want := tt.stored
			if want == nil {
				want = tt.parts
			}
			if got := artifactParts(t, stored.Artifacts); !reflect.DeepEqual(got, want) {
				t.Errorf("stored artifacts = %s, want %s", show(got), show(want))
			}
			if stored.Status.State != a2a.TaskStateCompleted {
				t.Errorf("stored state = %s, want completed", stored.Status.State)
			}
		})
	}
}

// next reads one event from a pulled stream, failing on an error or an
// early end.
func next(t *testing.T, pull func() (a2a.Event, error, bool)) a2a.Event {
	t.Helper()
	ev, err, ok := pull()
	if !ok {
		t.Fatal("stream ended early")
	}
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return ev
}

// expectEnd fails unless the pulled stream has no more events.
func expectEnd(t *testing.T, pull func() (a2a.Event, error, bool)) {
	t.Helper()
	if ev, err, ok := pull(); ok {
		t.Errorf("stream went on with (%s, %v), want its end", describe(ev), err)
	}
}

// expectStatus reads one event and fails unless it is a status update of the
// task to state.
func expectStatus(t *testing.T, pull func() (a2a.Event, error, bool), task *a2a.Task, state a2a.TaskState) {
	t.Helper()
	ev := next(t, pull)
	st, ok := ev.(*a2a.TaskStatusUpdateEvent)
	if !ok || st.Status.State != state {
		t.Fatalf("event = %s, want %s", describe(ev), statusEv(state))
	}
	if st.TaskID != task.ID || st.ContextID != task.ContextID {
		t.Errorf("status ids = (%q, %q), want (%q, %q)", st.TaskID, st.ContextID, task.ID, task.ContextID)
	}
}

// startLongRunning streams a test-resubscribe-message-id message and reads
// up to the working status, returning the task and the rest of the stream.
func startLongRunning(ctx context.Context, t *testing.T, client *a2aclient.Client) (*a2a.Task, func() (a2a.Event, error, bool)) {
	t.Helper()
	pull, stop := iter.Pull2(client.SendStreamingMessage(ctx, send("test-resubscribe-message-id")))
	t.Cleanup(stop)
	ev := next(t, pull)
	task, ok := ev.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("first event = %s, want %s", describe(ev), taskEv(a2a.TaskStateSubmitted))
	}
	expectStatus(t, pull, task, a2a.TaskStateWorking)
	return task, pull
}

// TestResubscribe holds the long-running task in working until a second
// client has subscribed to it, then lets it finish: both streams must see
// the completion, and the script must have asked for the configured delay.
func TestResubscribe(t *testing.T) {
	const delay = 1234 * time.Millisecond
	exec := New(WithResubscribeDelay(delay))
	asked := make(chan time.Duration, 1)
	release := make(chan struct{})
	exec.wait = func(ctx context.Context, d time.Duration) error {
		asked <- d
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	client := serve(t, exec)
	ctx := testContext(t)

	task, stream := startLongRunning(ctx, t, client)

	sub, stopSub := iter.Pull2(client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}))
	defer stopSub()
	// a2a-go opens a resubscription with the current task.
	ev := next(t, sub)
	if snap, ok := ev.(*a2a.Task); !ok || snap.ID != task.ID || snap.Status.State != a2a.TaskStateWorking {
		t.Fatalf("first resubscribe event = %s, want the task in working", show(ev))
	}

	close(release)
	for _, s := range []struct {
		name string
		pull func() (a2a.Event, error, bool)
	}{{"original stream", stream}, {"resubscription", sub}} {
		t.Run(s.name, func(t *testing.T) {
			expectStatus(t, s.pull, task, a2a.TaskStateCompleted)
			expectEnd(t, s.pull)
		})
	}
	if got := <-asked; got != delay {
		t.Errorf("waited %v, want the configured %v", got, delay)
	}
}

// TestCancelLongRunning cancels the long-running task mid-wait. CancelTask
// only returns once the execution has stopped, so with an hour-long delay it
// would run into the test timeout if the wait ignored cancellation.
func TestCancelLongRunning(t *testing.T) {
	client := serve(t, New(WithResubscribeDelay(time.Hour)))
	ctx := testContext(t)

	task, stream := startLongRunning(ctx, t, client)
	canceled, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	if canceled.ID != task.ID || canceled.Status.State != a2a.TaskStateCanceled {
		t.Errorf("CancelTask = (%q, %s), want (%q, canceled)", canceled.ID, canceled.Status.State, task.ID)
	}
	expectStatus(t, stream, task, a2a.TaskStateCanceled)
	expectEnd(t, stream)

	stored, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	if stored.Status.State != a2a.TaskStateCanceled {
		t.Errorf("stored state = %s, want canceled", stored.Status.State)
	}
}
