package a2ajson

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// codecEvents are events with every member the appenders write, and the
// values where encoding/json has its own rules: HTML characters, U+2028,
// invalid UTF-8, control characters, nil and empty lists, zones.
func codecEvents() map[string]a2a.Event {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -(5*3600+30*60)))
	utc := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := &a2a.Message{ID: "m<1>", ContextID: "c&", Extensions: []string{"e1", "e2"}, Metadata: map[string]any{"k": []any{1.5, "<"}},
		Parts: a2a.ContentParts{
			a2a.NewTextPart("a\"b\\c\n\r\t\b\f\x01\x1f\x7f <>& \u2028\u2029 é 😀 \xff\xfe end"),
			a2a.NewRawPart([]byte{0, 1, 2, 250}),
			{Content: a2a.Raw(nil)},
			a2a.NewDataPart(map[string]any{"z": 1.0, "a": []any{nil, true}}),
			a2a.NewDataPart(nil),
			a2a.NewFileURLPart("https://x.example/f?a=1&b=2", "image/png"),
			{Content: a2a.URL(""), Filename: "f.txt"},
			{Filename: "only.txt", MediaType: "text/plain", Metadata: map[string]any{"m": "v"}},
			{},
			nil,
		},
		ReferenceTasks: []a2a.TaskID{"t0", "t<"}, Role: a2a.MessageRoleAgent, TaskID: "t1"}
	bare := &a2a.Message{ID: "m2", Parts: a2a.ContentParts{}}
	art := &a2a.Artifact{ID: "a1", Description: "d", Extensions: []string{"x"}, Metadata: map[string]any{"contextId": "c"}, Name: "n",
		Parts: a2a.ContentParts{a2a.NewTextPart("x")}}
	return map[string]a2a.Event{
		"message":      msg,
		"bare message": bare,
		"nil parts":    &a2a.Message{ID: "m3", Role: a2a.MessageRoleUser},
		"task": &a2a.Task{ID: "t1", ContextID: "c1", Metadata: map[string]any{"n": 2.0},
			History: []*a2a.Message{msg, bare, nil}, Artifacts: []*a2a.Artifact{art, nil, {ID: "a2"}},
			Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: bare, Timestamp: &ts}},
		"task unspecified": &a2a.Task{ID: "t1", ContextID: "c1", History: []*a2a.Message{}, Artifacts: []*a2a.Artifact{}},
		"status": &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Metadata: map[string]any{"k": "v"},
			Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: msg, Timestamp: &utc}},
		"status bare": &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1"},
		"artifact": &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Append: true, LastChunk: true,
			Artifact: art, Metadata: map[string]any{"k": 1.0}},
		"artifact nil":  &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1"},
		"nil task":      (*a2a.Task)(nil),
		"nil message":   (*a2a.Message)(nil),
		"nil status":    (*a2a.TaskStatusUpdateEvent)(nil),
		"nil artifact":  (*a2a.TaskArtifactUpdateEvent)(nil),
		"no event type": nil,
	}
}

func TestAppendEventMatchesJSON(t *testing.T) {
	for name, ev := range codecEvents() {
		t.Run(name, func(t *testing.T) {
			want, wantErr := json.Marshal(a2a.StreamResponse{Event: ev})
			got, err := AppendStreamResponse(nil, ev)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("AppendStreamResponse error %v, json.Marshal error %v", err, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendStreamResponse:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestAppendRefuses(t *testing.T) {
	tests := map[string]a2a.Event{
		"year 10000": &a2a.TaskStatusUpdateEvent{Status: a2a.TaskStatus{Timestamp: ptr(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}},
		"year -1":    &a2a.TaskStatusUpdateEvent{Status: a2a.TaskStatus{Timestamp: ptr(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC))}},
		"zone 24h":   &a2a.TaskStatusUpdateEvent{Status: a2a.TaskStatus{Timestamp: ptr(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("z", 24*3600)))}},
		"data":       &a2a.Message{Parts: a2a.ContentParts{a2a.NewDataPart(func() {})}},
		"metadata":   &a2a.Message{Metadata: map[string]any{"f": make(chan int)}},
	}
	for name, ev := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := json.Marshal(a2a.StreamResponse{Event: ev}); err == nil {
				t.Fatal("json.Marshal accepts it: the case tests nothing")
			}
			if got, err := AppendStreamResponse(nil, ev); err == nil {
				t.Fatalf("AppendStreamResponse = %s, want an error", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzAppendEvent checks AppendStreamResponse against json.Marshal on every event the
// store can decode: the same bytes, or an error from both.
func FuzzAppendEvent(f *testing.F) {
	for _, ev := range codecEvents() {
		if b, err := json.Marshal(a2a.StreamResponse{Event: ev}); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var sr a2a.StreamResponse
		if json.Unmarshal(b, &sr) != nil {
			return
		}
		want, wantErr := json.Marshal(sr)
		got, err := AppendStreamResponse(nil, sr.Event)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("AppendStreamResponse error %v, json.Marshal error %v", err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendStreamResponse:\n got %s\nwant %s", got, want)
		}
	})
}
