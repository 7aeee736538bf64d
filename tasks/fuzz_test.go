package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// FuzzDecodeTaskRecord feeds the store's decode path arbitrary bytes: it must
// never panic, and whatever it accepts must survive a re-encode.
func FuzzDecodeTaskRecord(f *testing.F) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))},
		Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"k": 1.0})}}}}
	good, _ := json.Marshal(taskRecord{Owner: Owner{Principal: "p"}, Version: 3, Updated: time.Unix(1, 0), Task: task})
	f.Add(good)
	f.Add([]byte(`{"task":{"id":"t1"}}`))
	f.Add([]byte(`{"task":null}`))
	f.Add([]byte(`{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"history":[{"parts":[{"raw":"AA=="}]}]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := decodeTaskRecord("t1", b)
		if err != nil {
			return
		}
		again, err := json.Marshal(taskRecord{Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated, Task: snap.Task})
		if err != nil {
			t.Fatalf("accepted record does not re-encode: %v", err)
		}
		if _, err := decodeTaskRecord("t1", again); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}

// FuzzDecodeEvent checks the event log's decode path the same way.
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
		next, err := apply(prev, sr.Event, time.Unix(5, 0))
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

// FuzzDecodeWALRecord feeds the store's log reader arbitrary bytes: it must
// never panic, and a record it accepts must encode back to the same bytes.
func FuzzDecodeWALRecord(f *testing.F) {
	good := &walAppend{seq: 7, group: 6, id: "t1", version: 2, events: 1, updated: time.Unix(1, 2).UnixNano(), unfinished: true,
		owner: ownerKey(Owner{Principal: "p"}), index: []byte("TASK_STATE_WORKING\x00c"),
		encoded: []byte{eventBatchV1, 0, 0, 0, 2, '{', '}'}, rec: []byte(`{"task":{}}`)}
	f.Add(appendWALRecord(nil, good, 0))
	f.Add(appendWALRecord(appendWALRecord(nil, good, 0), good, 0)[:20])
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, n, err := decodeWALRecord(b, 0)
		if err != nil {
			if errors.Is(err, errWALChecksum) && a == nil && n >= walHeaderSize {
				return // a header that checks, over a payload that does not
			}
			if a != nil || n != 0 {
				t.Fatalf("error %v with a record of %d bytes", err, n)
			}
			return
		}
		if again := appendWALRecord(nil, a, 0); !bytes.Equal(again, b[:n]) {
			t.Fatalf("accepted record re-encodes differently:\n%x\n%x", b[:n], again)
		}
	})
}
