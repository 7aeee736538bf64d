package a2ahttp

import (
	"bufio"
	"bytes"
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// subEngine answers SubscribeToTask with events, or err before any.
type subEngine struct {
	a2asrv.RequestHandler
	events []a2a.Event
	err    error
}

func (e subEngine) SubscribeToTask(context.Context, *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if e.err != nil {
			yield(nil, e.err)
			return
		}
		for _, ev := range e.events {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// sseData serves body through h and returns the answer's data lines, and
// whether each event had an id line.
func sseData(t *testing.T, h http.Handler, body string) (data []string, ids int) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Body = &bufferedBody{Reader: bytes.NewReader([]byte(body)), data: []byte(body)}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if ct := w.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, v)
		}
		if strings.HasPrefix(sc.Text(), "id: ") {
			ids++
		}
	}
	return data, ids
}

// TestSubscribeJSONRPCWritesWhatA2AGoWrites: a JSON-RPC 1.0 SubscribeToTask
// served by streamJSONRPC (one goroutine, the event JSON shared through
// sharedEvents) writes the events a2a-go's handler writes, byte for byte,
// each with an event id, for every id form; and a subscription refused
// before its first event is a2a-go's own error event.
func TestSubscribeJSONRPCWritesWhatA2AGoWrites(t *testing.T) {
	ts := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	task := &a2a.Task{ID: "t-1", ContextID: "c-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts}}
	msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart(`<b>"tick"</b> ✓`))
	eng := subEngine{events: []a2a.Event{
		task,
		&a2a.TaskStatusUpdateEvent{TaskID: "t-1", ContextID: "c-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: msg, Timestamp: &ts}},
		&a2a.TaskArtifactUpdateEvent{TaskID: "t-1", ContextID: "c-1", Artifact: &a2a.Artifact{ID: "a-1", Parts: a2a.ContentParts{a2a.NewTextPart("x")}}, Append: true},
		&a2a.TaskStatusUpdateEvent{TaskID: "t-1", ContextID: "c-1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &ts}},
	}}
	for _, id := range []string{`"s-1"`, `42`, `1.5`} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"SubscribeToTask","params":{"id":"t-1"}}`
		want, _ := sseData(t, a2asrv.NewJSONRPCHandler(eng), body)
		// Twice: the second time every event's JSON comes from the cache.
		for round := range 2 {
			got, ids := sseData(t, streamJSONRPC(eng), body)
			if ids != len(got) || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("id %s, round %d: %d events with %d ids:\n%s\na2a-go writes:\n%s", id, round, len(got), ids, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	}
	refused := subEngine{err: a2a.ErrTaskNotFound}
	body := `{"jsonrpc":"2.0","id":7,"method":"SubscribeToTask","params":{"id":"nope"}}`
	want, _ := sseData(t, a2asrv.NewJSONRPCHandler(refused), body)
	got, _ := sseData(t, streamJSONRPC(refused), body)
	if len(got) != 1 || got[0] != want[0] || !strings.Contains(got[0], `"code":-32001`) {
		t.Fatalf("refused: %q, a2a-go writes %q", got, want)
	}
}

// TestSharedEventsEncodeOnce: streams that carry the same event share one
// encoding; an event pushed out of the ring, or too large to keep, is
// encoded again and still right.
func TestSharedEventsEncodeOnce(t *testing.T) {
	c := newEventCache(2, 200)
	ev := &a2a.TaskStatusUpdateEvent{TaskID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	a, err := c.appendEvent(nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	ev.TaskID = "changed" // a cached event is written as first encoded: events are never changed once published
	b, _ := c.appendEvent([]byte("x"), ev)
	if string(b) != "x"+string(a) {
		t.Fatalf("second stream wrote %s, want x%s (the shared encoding)", b, a)
	}
	c.appendEvent(nil, &a2a.TaskStatusUpdateEvent{TaskID: "u"})
	c.appendEvent(nil, &a2a.TaskStatusUpdateEvent{TaskID: "v"}) // pushes ev out
	if b, _ := c.appendEvent(nil, ev); !bytes.Contains(b, []byte(`"changed"`)) {
		t.Fatalf("an event pushed out was not encoded again: %s", b)
	}
	big := &a2a.TaskArtifactUpdateEvent{TaskID: "t", Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("y", 300))}}}
	first, _ := c.appendEvent(nil, big)
	if e, ok := c.byEv[a2a.Event(big)]; ok || slices.Contains(c.order, a2a.Event(big)) {
		t.Fatalf("an event over maxJSON is kept: entry %+v", e)
	}
	if again, _ := c.appendEvent(nil, big); string(again) != string(first) {
		t.Fatalf("a large event encoded again as %s, first %s", again, first)
	}
}
