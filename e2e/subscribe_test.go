package e2e

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestSubscribersSeeEveryEventOnce has one task watched by its own stream,
// two concurrent subscribers on different bindings and a late resubscriber
// that dropped its first subscription. The task is the long-running
// resubscribe one, so every subscriber is attached while it waits, with no
// timing involved: each subscription has delivered its first event (the task
// as it stands) before the next step. Cancelling it then produces the one
// event everyone must see exactly once.
func TestSubscribersSeeEveryEventOnce(t *testing.T) {
	ag := startAgent(t, agentConfig{})
	card := fetchCard(t, ag)
	jsonrpc := transports[0].connect(t, card)
	rest := transports[1].connect(t, card)
	grpc := transports[2].connect(t, card)

	sent := userMessage(uniqueID("test-resubscribe-message-id"), "watch me")
	origin := openStream(t, "the sender's stream", jsonrpc.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{Message: sent}))
	task := wantTaskEvent(t, "sender's event 0", origin.read(), "", a2a.TaskStateSubmitted)
	origin.readUntilWorking()

	subA := openStream(t, "subscriber A (REST)", rest.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: task.ID}))
	subA.read()
	subB := openStream(t, "subscriber B (gRPC)", grpc.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: task.ID}))
	subB.read()
	// The late one subscribes, leaves, and comes back: what it gets the
	// second time must not depend on what it was sent the first time.
	first := openStream(t, "late subscriber, first try (JSON-RPC)", jsonrpc.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: task.ID}))
	first.read()
	first.close()
	late := openStream(t, "late resubscriber (JSON-RPC)", jsonrpc.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: task.ID}))
	late.read()

	canceled, err := rest.CancelTask(callCtx(t), &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	wantState(t, "CancelTask", canceled, a2a.TaskStateCanceled)

	originEvs := origin.readToEnd()
	// The sender saw the whole life: submitted, working, canceled.
	if len(originEvs) != 3 {
		t.Fatalf("sender's stream got %d events, want 3 (task, working, canceled): %v", len(originEvs), eventsJSON(t, originEvs))
	}
	working := wantStatusEvent(t, "sender's event 1", originEvs[1], task.ID, a2a.TaskStateWorking)
	final := wantStatusEvent(t, "sender's event 2", originEvs[2], task.ID, a2a.TaskStateCanceled)

	// Every subscriber joined while the task was working: the task as it
	// stood, then the cancel, once. Same bytes everywhere: the events come
	// from the one stored log, whatever the binding.
	var want []string
	for _, s := range []*stream{subA, subB, late} {
		evs := s.readToEnd()
		if len(evs) != 2 {
			t.Fatalf("%s got %d events, want 2 (the task, canceled): %v", s.name, len(evs), eventsJSON(t, evs))
		}
		snap := wantTaskEvent(t, s.name+" event 0", evs[0], task.ID, a2a.TaskStateWorking)
		if asJSON(t, snap.Status) != asJSON(t, working.Status) {
			t.Fatalf("%s snapshot status = %s, want the working status the sender saw %s", s.name, asJSON(t, snap.Status), asJSON(t, working.Status))
		}
		wantUserMessageInHistory(t, s.name+" snapshot", snap, sent)
		got := eventsJSON(t, evs)
		if got[1] != asJSON(t, final) {
			t.Fatalf("%s last event = %s, want the sender's %s", s.name, got[1], asJSON(t, final))
		}
		if want == nil {
			want = got
		} else if !slices.Equal(got, want) {
			t.Fatalf("%s saw %v, want what %s saw: %v", s.name, got, subA.name, want)
		}
	}
	if got := getTask(t, jsonrpc, task.ID); asJSON(t, got.Status) != asJSON(t, final.Status) {
		t.Fatalf("GetTask status = %s, want the streamed final %s", asJSON(t, got.Status), asJSON(t, final.Status))
	}
}

// TestStreamChunkedArtifact checks a stream whose artifact arrives in two
// chunks: the order, the append and last-chunk flags, and that the stored
// task holds both chunks in one artifact.
func TestStreamChunkedArtifact(t *testing.T) {
	ag := startAgent(t, agentConfig{})
	card := fetchCard(t, ag)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			c := tr.connect(t, card)
			evs, err := collect(c.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{
				Message: userMessage(uniqueID("tck-stream-artifact-chunked"), "chunks")}))
			if err != nil {
				t.Fatalf("SendStreamingMessage: %v after %v", err, eventsJSON(t, evs))
			}
			if len(evs) != 5 {
				t.Fatalf("got %d events, want 5 (task, working, chunk, chunk, completed): %v", len(evs), eventsJSON(t, evs))
			}
			task := wantTaskEvent(t, "event 0", evs[0], "", a2a.TaskStateSubmitted)
			wantStatusEvent(t, "event 1", evs[1], task.ID, a2a.TaskStateWorking)
			c1, ok1 := evs[2].(*a2a.TaskArtifactUpdateEvent)
			c2, ok2 := evs[3].(*a2a.TaskArtifactUpdateEvent)
			if !ok1 || !ok2 || text(c1.Artifact.Parts) != "chunk-1 " || c1.Append || c1.LastChunk ||
				text(c2.Artifact.Parts) != "chunk-2" || !c2.Append || !c2.LastChunk || c1.Artifact.ID != c2.Artifact.ID {
				t.Fatalf("events 2-3 = %s, %s; want chunk-1 then chunk-2 appended to the same artifact, last", asJSON(t, evs[2]), asJSON(t, evs[3]))
			}
			wantStatusEvent(t, "event 4", evs[4], task.ID, a2a.TaskStateCompleted)
			stored := getTask(t, c, task.ID)
			if len(stored.Artifacts) != 1 || stored.Artifacts[0].ID != c1.Artifact.ID || text(stored.Artifacts[0].Parts) != "chunk-1 chunk-2" {
				t.Fatalf("stored artifacts = %s, want one artifact %s %q", asJSON(t, stored.Artifacts), c1.Artifact.ID, "chunk-1 chunk-2")
			}
		})
	}
}
