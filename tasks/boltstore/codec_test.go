package boltstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/a2ajson"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// sameRecord checks that the codec writes snap's record, and evs, byte for
// byte as json.Marshal does.
func sameRecord(t *testing.T, c *recordCodec, snap *tasks.Snapshot, evs ...a2a.Event) []a2ajson.Encoded[a2a.Artifact] {
	t.Helper()
	value, known, err := encodeEvents(evs)
	if err != nil {
		t.Fatalf("encode events: %v", err)
	}
	encoded := frames(t, value)
	if len(encoded) != len(evs) {
		t.Fatalf("%d events in the value, want %d", len(encoded), len(evs))
	}
	for i, ev := range evs {
		want, err := json.Marshal(a2a.StreamResponse{Event: ev})
		if err != nil {
			t.Fatalf("reference encode of event %d: %v", i, err)
		}
		if !bytes.Equal(encoded[i], want) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, encoded[i], want)
		}
	}
	for _, k := range known {
		if want, _ := json.Marshal(k.V); !bytes.Equal(k.JSON, want) {
			t.Fatalf("artifact of an event:\n got %s\nwant %s", k.JSON, want)
		}
	}
	got, err := c.encode(snap, known)
	if err != nil {
		t.Fatalf("codec encode: %v", err)
	}
	want, err := json.Marshal(record.Task{Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated, Task: snap.Task})
	if err != nil {
		t.Fatalf("reference encode: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("record:\n got %s\nwant %s", got, want)
	}
	return known
}

// frames splits a batch value of the events bucket.
func frames(t *testing.T, v []byte) [][]byte {
	t.Helper()
	if len(v) == 0 || v[0] != eventBatchV1 {
		t.Fatalf("not a batch: %q", v)
	}
	var out [][]byte
	for v = v[1:]; len(v) > 0; {
		n := binary.BigEndian.Uint32(v)
		out = append(out, v[4:4+n])
		v = v[4+n:]
	}
	return out
}

// TestRecordCodecReusesParts runs a task through tasks.Apply, as the engine does,
// and checks each record, and that history and artifacts already encoded
// are not encoded again.
func TestRecordCodecReusesParts(t *testing.T) {
	c := newRecordCodec()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History:  []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("<hi> & "+strings.Repeat("x", 100)))},
		Metadata: map[string]any{"k": "v"}}
	snap, err := tasks.Apply(nil, task, now)
	if err != nil {
		t.Fatal(err)
	}
	snap.Owner = tasks.Owner{Principal: "p", Tenant: "ten"}
	sameRecord(t, c, snap)
	firstHistory := &c.tasks["t1"].history[0].JSON[0]

	say := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("working on it"))
	events := []a2a.Event{
		a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, say),
		a2a.NewArtifactEvent(task, a2a.NewTextPart("part 1")),
		a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil), // say moves to the history
		a2a.NewArtifactEvent(task, a2a.NewDataPart(map[string]any{"n": 1.0})),
	}
	events = append(events, &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Append: true,
		Artifact: &a2a.Artifact{ID: events[1].(*a2a.TaskArtifactUpdateEvent).Artifact.ID, Parts: a2a.ContentParts{a2a.NewTextPart(", part 2")}}})
	for i, ev := range events {
		if snap, err = tasks.Apply(snap, ev, now.Add(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
		known := sameRecord(t, c, snap, ev)
		if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && !e.Append {
			arts := c.tasks["t1"].artifacts
			if len(known) != 1 || &arts[len(arts)-1].JSON[0] != &known[0].JSON[0] {
				t.Fatalf("event %d: the new artifact was encoded again for the record", i)
			}
		}
		if got := &c.tasks["t1"].history[0].JSON[0]; got != firstHistory {
			t.Fatalf("event %d: the first message was encoded again", i)
		}
	}
	enc := c.tasks["t1"]
	if len(enc.history) != 2 || len(enc.artifacts) != 2 {
		t.Fatalf("remembered %d messages and %d artifacts, want 2 and 2", len(enc.history), len(enc.artifacts))
	}
	secondArtifact := &enc.artifacts[1].JSON[0]
	if enc.artifacts[1].V != events[3].(*a2a.TaskArtifactUpdateEvent).Artifact {
		t.Fatal("the second artifact is not the one of its event")
	}
	if snap, err = tasks.Apply(snap, a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	sameRecord(t, c, snap)
	if &c.tasks["t1"].artifacts[1].JSON[0] != secondArtifact {
		t.Fatal("an unchanged artifact was encoded again")
	}

	if snap, err = tasks.Apply(snap, a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sameRecord(t, c, snap)
	if _, ok := c.tasks["t1"]; ok {
		t.Fatal("a completed task is still remembered")
	}
}

// TestRecordCodecNewOwner checks a record never carries a remembered owner
// that is not the snapshot's.
func TestRecordCodecNewOwner(t *testing.T) {
	c := newRecordCodec()
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	sameRecord(t, c, &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: "a"}, Version: 1})
	sameRecord(t, c, &tasks.Snapshot{Task: task, Owner: tasks.Owner{Principal: "b"}, Version: 2})
}

func TestRecordCodecIsBounded(t *testing.T) {
	c := newRecordCodec()
	for i := range maxCodecTasks + 10 {
		task := &a2a.Task{ID: a2a.TaskID("t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String()),
			ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := c.encode(&tasks.Snapshot{Task: task, Version: 1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.tasks); n != maxCodecTasks {
		t.Fatalf("%d tasks remembered, want %d", n, maxCodecTasks)
	}
}

// FuzzEncodeTaskRecord checks the codec against json.Marshal on any record
// the store can decode, encoded once and again after a status update (the
// second time with its history and artifacts remembered).
func FuzzEncodeTaskRecord(f *testing.F) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))},
		Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"k": 1.0})}}}}
	good, _ := json.Marshal(record.Task{Owner: tasks.Owner{Principal: "p"}, Version: 3, Updated: time.Unix(1, 0), Task: task})
	f.Add(good)
	f.Add([]byte(`{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"history":[{"parts":[{"raw":"AA=="}]},null],"artifacts":[null]}}`))
	f.Add([]byte(`{"owner":{"principal":"<p>"},"task":{"id":"t1","metadata":{"a":[1,"\u2028"]},"status":{"state":"TASK_STATE_SUBMITTED"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := record.Decode("t1", b)
		if err != nil {
			return
		}
		if _, err := json.Marshal(record.Task{Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated, Task: snap.Task}); err != nil {
			return // not encodable at all (a time out of range): nothing to compare
		}
		c := newRecordCodec()
		sameRecord(t, c, snap)
		next, err := tasks.Apply(snap, a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateWorking, nil), time.Unix(2, 0))
		if err != nil {
			return
		}
		sameRecord(t, c, next)
	})
}

// TestDecodedCache checks that reads share one decoded snapshot while the
// stored record stays the same, and see every write at once.
func TestDecodedCache(t *testing.T) {
	s, err := Open(t.TempDir()+"/tasks.db", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	owner := tasks.Owner{Principal: "p"}
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	snap := &tasks.Snapshot{Task: task, Owner: owner, Version: 1, Updated: time.Unix(1, 0)}
	if err := s.Append(t.Context(), snap, []a2a.Event{task}); err != nil {
		t.Fatal(err)
	}
	first, err := s.Get(t.Context(), owner, "t1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Get(t.Context(), owner, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatal("an unchanged record was decoded again")
	}
	if _, err := s.Get(t.Context(), tasks.Owner{Principal: "other"}, "t1"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("another owner's read of a cached task: %v", err)
	}
	next, err := tasks.Apply(snap, a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil), time.Unix(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), next, []a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), owner, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("read after a write: version %d state %s", got.Version, got.Task.Status.State)
	}
}

func TestDecodedCacheIsBounded(t *testing.T) {
	c := newDecodedCache()
	filler := strings.Repeat("x", 32<<10)
	for i := range 2 * maxDecodedBytes / len(filler) {
		id := a2a.TaskID("t" + strconv.Itoa(i))
		rec, err := json.Marshal(record.Task{Task: &a2a.Task{ID: id, ContextID: "c", Metadata: map[string]any{"f": filler}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.decode(id, rec); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, e := range c.entries {
		total += len(e.rec)
	}
	if total != c.size || c.size > maxDecodedBytes || len(c.entries) == 0 {
		t.Fatalf("cache holds %d bytes in %d entries (counted %d), budget %d", total, len(c.entries), c.size, maxDecodedBytes)
	}
	big, _ := json.Marshal(record.Task{Task: &a2a.Task{ID: "big", ContextID: "c", Metadata: map[string]any{"f": strings.Repeat("y", maxDecodedRecord)}}})
	if _, err := c.decode("big", big); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.entries["big"]; ok {
		t.Fatal("a record over the size limit was cached")
	}
}

func TestDecodeEvents(t *testing.T) {
	task := &a2a.Task{ID: "t1", ContextID: "c1"}
	evs := []a2a.Event{
		a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil),
		a2a.NewArtifactEvent(task, a2a.NewTextPart("x")),
		a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil),
	}
	batch, _, err := encodeEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	single, err := json.Marshal(a2a.StreamResponse{Event: evs[0]})
	if err != nil {
		t.Fatal(err)
	}
	for after := uint64(0); after <= 13; after++ {
		got, err := decodeEvents(nil, 10, after, batch)
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		want := max(0, min(3, 12-int(after)))
		if len(got) != want {
			t.Fatalf("after %d: %d events, want %d", after, len(got), want)
		}
		for i, ev := range got {
			g, _ := json.Marshal(a2a.StreamResponse{Event: ev.Event})
			if seq := uint64(13 - want + i); ev.Seq != seq || !bytes.Equal(g, frames(t, batch)[seq-10]) {
				t.Fatalf("after %d: event %d is %d %#v", after, i, ev.Seq, ev.Event)
			}
		}
	}
	if got, err := decodeEvents(nil, 5, 4, single); err != nil || len(got) != 1 || got[0].Seq != 5 {
		t.Fatalf("a value of one event, as older stores wrote it: %v, %v", got, err)
	}
	if got, err := decodeEvents(nil, 5, 5, single); err != nil || len(got) != 0 {
		t.Fatalf("a value of one event, already seen: %v, %v", got, err)
	}
	for name, v := range map[string][]byte{
		"empty":          {},
		"no events":      {eventBatchV1},
		"short length":   {eventBatchV1, 0, 0},
		"length too big": {eventBatchV1, 0, 0, 0, 9, '{', '}'},
		"bad event":      append([]byte{eventBatchV1, 0, 0, 0, 1}, '{'),
		"bad single":     []byte("{"),
	} {
		if _, err := decodeEvents(nil, 1, 0, v); !errors.Is(err, tasks.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestBoltEventsAcrossWrites reads a task's log from every position when its
// writes hold several events and another task's log follows it in the file.
func TestBoltEventsAcrossWrites(t *testing.T) {
	s, err := Open(t.TempDir()+"/tasks.db", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	owner := tasks.Owner{Principal: "p"}
	for _, id := range []a2a.TaskID{"a", "b"} {
		task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
		snap := &tasks.Snapshot{Task: task, Owner: owner, Version: 1}
		if err := s.Append(t.Context(), snap, []a2a.Event{task}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{3, 1, 2} {
			evs := make([]a2a.Event, n)
			for i := range evs {
				evs[i] = a2a.NewArtifactEvent(task, a2a.NewTextPart(string(id)))
			}
			next := &tasks.Snapshot{Task: task, Owner: owner, Version: snap.Version + uint64(n)}
			if err := s.Append(t.Context(), next, evs); err != nil {
				t.Fatal(err)
			}
			snap = next
		}
	}
	for _, id := range []a2a.TaskID{"a", "b"} {
		for after := uint64(0); after <= 8; after++ {
			got, err := s.Events(t.Context(), owner, id, after)
			if err != nil {
				t.Fatalf("%s after %d: %v", id, after, err)
			}
			if want := max(0, 7-int(after)); len(got) != want {
				t.Fatalf("%s after %d: %d events, want %d", id, after, len(got), want)
			}
			for i, ev := range got {
				if ev.Seq != after+uint64(i)+1 || ev.Event.TaskInfo().TaskID != id {
					t.Fatalf("%s after %d: event %d is %d of %s", id, after, i, ev.Seq, ev.Event.TaskInfo().TaskID)
				}
			}
		}
	}
}

// FuzzDecodeEvents feeds the events bucket's decode path arbitrary values: it
// must never panic, and the events it accepts must survive a re-encode.
func FuzzDecodeEvents(f *testing.F) {
	task := &a2a.Task{ID: "t1", ContextID: "c1"}
	batch, _, _ := encodeEvents([]a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil), a2a.NewArtifactEvent(task, a2a.NewTextPart("x"))})
	f.Add(batch, uint8(0))
	f.Add(batch, uint8(1))
	single, _ := json.Marshal(a2a.StreamResponse{Event: task})
	f.Add(single, uint8(0))
	f.Add([]byte{eventBatchV1, 0, 0, 0, 2, '{', '}'}, uint8(0))
	f.Fuzz(func(t *testing.T, v []byte, after uint8) {
		got, err := decodeEvents(nil, 1, uint64(after), v)
		if err != nil {
			return
		}
		evs := make([]a2a.Event, len(got))
		for i, ev := range got {
			if ev.Seq != uint64(after)+uint64(i)+1 {
				t.Fatalf("event %d has seq %d after %d", i, ev.Seq, after)
			}
			evs[i] = ev.Event
		}
		again, _, err := encodeEvents(evs)
		if err != nil {
			t.Fatalf("accepted events do not re-encode: %v", err)
		}
		back, err := decodeEvents(nil, 1, 0, again)
		if len(evs) == 0 {
			return // a batch of nothing is not a value the store writes
		}
		if err != nil || len(back) != len(evs) {
			t.Fatalf("re-encoded events: %d, %v; want %d", len(back), err, len(evs))
		}
	})
}
