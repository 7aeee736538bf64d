package tasks

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// FuzzDecodeEvent feeds the event log's decode path (a2a-go's StreamResponse) arbitrary
// bytes: it must never panic, and whatever it accepts must survive a re-encode.
func FuzzDecodeEvent(f *testing.F) {
	for _, ev := range []a2a.Event{
		a2a.NewStatusUpdateEvent(&a2a.Task{ID: "t", ContextID: "c"}, a2a.TaskStateWorking, nil),
		&a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: true, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("x")}}},
		a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("m")),
	} {
		b, _ := json.Marshal(a2a.StreamResponse{Event: ev})
		f.Add(b)
	}
	f.Add([]byte(`{"task":{},"message":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sr a2a.StreamResponse
		if json.Unmarshal(b, &sr) != nil {
			return
		}
		again, err := json.Marshal(sr)
		if err != nil {
			t.Fatalf("accepted event does not re-encode: %v", err)
		}
		var back a2a.StreamResponse
		if err := json.Unmarshal(again, &back); err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
	})
}

// FuzzApply applies arbitrary decoded events to a working task: the state
// machine must never panic, never change the snapshot it was given, and
// whatever it accepts must re-encode.
func FuzzApply(f *testing.F) {
	for _, ev := range []a2a.Event{
		a2a.NewStatusUpdateEvent(&a2a.Task{ID: "t", ContextID: "c"}, a2a.TaskStateCompleted, nil),
		&a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Append: true, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("x")}}},
		&a2a.TaskArtifactUpdateEvent{TaskID: "t", ContextID: "c", Artifact: &a2a.Artifact{ID: "b"}},
		&a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}},
	} {
		b, _ := json.Marshal(a2a.StreamResponse{Event: ev})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var sr a2a.StreamResponse
		if json.Unmarshal(b, &sr) != nil {
			return
		}
		prev := &Snapshot{Version: 2, Task: &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("a")}}}}}
		before, _ := json.Marshal(prev.Task)
		next, err := Apply(prev, sr.Event, time.Unix(5, 0))
		after, _ := json.Marshal(prev.Task)
		if string(before) != string(after) {
			t.Fatalf("apply changed its input: %s -> %s", before, after)
		}
		if err != nil {
			return
		}
		if next.Version != 3 {
			t.Fatalf("version %d", next.Version)
		}
		if _, err := json.Marshal(next.Task); err != nil {
			t.Fatalf("result does not encode: %v", err)
		}
	})
}
