package boltstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// recordStore is a bbolt file the codec's writes are applied to, as the
// store applies them, and read back from.
type recordStore struct {
	db  *bolt.DB
	seq uint64
}

func newRecordStore(t testing.TB) *recordStore {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "r.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &recordStore{db: db}
}

// sameRecord checks that the codec writes evs byte for byte as json.Marshal
// does, and snap's task so that it reads back (whole, and with its newest
// entries only) as json.Marshal writes it; it returns the write.
func sameRecord(t *testing.T, c *recordCodec, rs *recordStore, snap *tasks.Snapshot, evs ...a2a.Event) *taskDelta {
	t.Helper()
	value, err := encodeEvents(evs)
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
	d, mem, err := c.delta(snap, evs)
	if err != nil {
		t.Fatalf("codec delta: %v", err)
	}
	back, err := decodeDelta(d.encode())
	if err != nil {
		t.Fatalf("decode delta: %v", err)
	}
	rs.seq++
	var got, recent *tasks.Snapshot
	err = rs.db.Update(func(tx *bolt.Tx) error {
		if err := writeTask(tx, snap.Task.ID, rs.seq, back.encode()); err != nil {
			return err
		}
		v := tx.Bucket(bucketTasks).Get([]byte(snap.Task.ID))
		var err error
		if got, err = readTask(tx, snap.Task.ID, v, wholeTask); err != nil {
			return err
		}
		recent, err = readTask(tx, snap.Task.ID, v, readShape{hist: 1, noArts: true})
		return err
	})
	if err != nil {
		t.Fatalf("write and read back: %v", err)
	}
	c.remember(snap.Task.ID, mem, tasks.IsUnfinished(snap.Task.Status.State))
	want := recordJSON(t, snap)
	if g := recordJSON(t, got); g != want {
		t.Fatalf("record:\n got %s\nwant %s", g, want)
	}
	short := *snap.Task
	short.Artifacts = nil
	if len(short.History) > 1 {
		short.History = short.History[len(short.History)-1:]
	}
	if g, w := recordJSON(t, recent), recordJSON(t, &tasks.Snapshot{Task: &short, Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated}); g != w {
		t.Fatalf("recent:\n got %s\nwant %s", g, w)
	}
	return d
}

func recordJSON(t *testing.T, s *tasks.Snapshot) string {
	t.Helper()
	b, err := json.Marshal(record.Task{Owner: s.Owner, Version: s.Version, Updated: s.Updated, Task: s.Task})
	if err != nil {
		t.Fatalf("reference encode: %v", err)
	}
	return string(b)
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

// TestRecordCodecDeltas runs a task through tasks.Apply, as the engine does,
// and checks that each write reads back as the snapshot, and carries only
// what its events add: no history entry or part written before.
func TestRecordCodecDeltas(t *testing.T) {
	c, rs := newRecordCodec(), newRecordStore(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History:  []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("<hi> & "+strings.Repeat("x", 100)))},
		Metadata: map[string]any{"k": "v"}}
	snap, err := tasks.Apply(nil, task, now)
	if err != nil {
		t.Fatal(err)
	}
	snap.Owner = tasks.Owner{Principal: "p", Tenant: "ten"}
	if d := sameRecord(t, c, rs, snap, task); !d.full {
		t.Fatal("a new task is not written whole")
	}

	say := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("working on it"))
	first := a2a.NewArtifactEvent(task, a2a.NewTextPart("part 1"))
	appendTo := func(id a2a.ArtifactID, text string, meta map[string]any) a2a.Event {
		return &a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Append: true,
			Artifact: &a2a.Artifact{ID: id, Parts: a2a.ContentParts{a2a.NewTextPart(text)}, Metadata: meta}}
	}
	type step struct {
		events     []a2a.Event
		full       bool
		hist, ops  int // history entries and artifact writes the delta carries
		appendsOps int // of which appends of parts
	}
	steps := []step{
		{events: []a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, say)}},
		{events: []a2a.Event{first}, ops: 1},
		{events: []a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil)}, hist: 1}, // say moves to the history
		{events: []a2a.Event{a2a.NewArtifactEvent(task, a2a.NewDataPart(map[string]any{"n": 1.0}))}, ops: 1},
		{events: []a2a.Event{appendTo(first.Artifact.ID, ", part 2", nil)}, ops: 1, appendsOps: 1},
		{events: []a2a.Event{appendTo(first.Artifact.ID, ", part 3", map[string]any{"m": "x"})}, ops: 1, appendsOps: 1}, // metadata change
		// A replace, then an append, in one write: the artifact is written whole.
		{events: []a2a.Event{&a2a.TaskArtifactUpdateEvent{TaskID: "t1", ContextID: "c1", Artifact: &a2a.Artifact{ID: first.Artifact.ID, Parts: a2a.ContentParts{a2a.NewTextPart("again")}}},
			appendTo(first.Artifact.ID, ", more", nil)}, ops: 1},
		{events: []a2a.Event{appendTo(first.Artifact.ID, ", after the replace", nil)}, ops: 1, appendsOps: 1},
		{events: []a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, say), a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, say)}, hist: 1},
		// The whole task, as an executor may yield it: written whole.
		{events: []a2a.Event{&a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			History: []*a2a.Message{say}}}, full: true, hist: 1},
		{events: []a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil)}},
		{events: []a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, say)}},
	}
	for i, st := range steps {
		for j, ev := range st.events {
			if snap, err = tasks.Apply(snap, ev, now.Add(time.Duration(i*10+j+1)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		d := sameRecord(t, c, rs, snap, st.events...)
		appends := 0
		for _, op := range d.ops {
			if op.appendTo {
				appends++
			}
		}
		if d.full != st.full || len(d.hist) != st.hist || len(d.ops) != st.ops || appends != st.appendsOps {
			t.Fatalf("step %d: write full=%v with %d history entries, %d artifact writes (%d appends); want %v, %d, %d (%d)",
				i, d.full, len(d.hist), len(d.ops), appends, st.full, st.hist, st.ops, st.appendsOps)
		}
	}
	if _, ok := c.tasks["t1"]; ok {
		t.Fatal("a completed task is still remembered")
	}
}

// TestRecordCodecFallsBack checks that a write the codec cannot prove
// follows what it remembers is written whole: another version, no events,
// a shorter history, one that is not the remembered one, or a failed write.
func TestRecordCodecFallsBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("a"))}}
	base := func(t *testing.T) (*recordCodec, *recordStore, *tasks.Snapshot) {
		c, rs := newRecordCodec(), newRecordStore(t)
		snap, err := tasks.Apply(nil, task, now)
		if err != nil {
			t.Fatal(err)
		}
		sameRecord(t, c, rs, snap, task)
		ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("b")))
		if snap, err = tasks.Apply(snap, ev, now); err != nil {
			t.Fatal(err)
		}
		if d := sameRecord(t, c, rs, snap, ev); d.full {
			t.Fatal("a status update was written whole")
		}
		return c, rs, snap
	}
	ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil)
	for name, change := range map[string]func(*recordCodec, *tasks.Snapshot) (*tasks.Snapshot, []a2a.Event){
		"other version": func(_ *recordCodec, s *tasks.Snapshot) (*tasks.Snapshot, []a2a.Event) {
			n := *s
			n.Version += 2
			return &n, []a2a.Event{ev}
		},
		"no events": func(_ *recordCodec, s *tasks.Snapshot) (*tasks.Snapshot, []a2a.Event) {
			return s, nil
		},
		"shorter history (redacted)": func(_ *recordCodec, s *tasks.Snapshot) (*tasks.Snapshot, []a2a.Event) {
			tk := *s.Task
			tk.History = nil
			return &tasks.Snapshot{Task: &tk, Owner: s.Owner, Version: s.Version + 1, Updated: s.Updated}, []a2a.Event{ev}
		},
		"other history entry": func(_ *recordCodec, s *tasks.Snapshot) (*tasks.Snapshot, []a2a.Event) {
			tk := *s.Task
			tk.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("redacted"))}
			return &tasks.Snapshot{Task: &tk, Owner: s.Owner, Version: s.Version + 1, Updated: s.Updated}, []a2a.Event{ev}
		},
		"failed write": func(c *recordCodec, s *tasks.Snapshot) (*tasks.Snapshot, []a2a.Event) {
			c.remember(s.Task.ID, nil, true)
			n, _ := tasks.Apply(s, ev, now)
			return n, []a2a.Event{ev}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, rs, snap := base(t)
			next, evs := change(c, snap)
			if d := sameRecord(t, c, rs, next, evs...); !d.full {
				t.Fatal("written as a delta")
			}
			if len(evs) == 0 { // and the write after it, which log recovery could not tell from one after the write before
				after, err := tasks.Apply(next, ev, now)
				if err != nil {
					t.Fatal(err)
				}
				if d := sameRecord(t, c, rs, after, ev); !d.full {
					t.Fatal("the write after a write of no events is a delta")
				}
			}
		})
	}
}

func TestRecordCodecIsBounded(t *testing.T) {
	c := newRecordCodec()
	for i := range maxCodecTasks + 10 {
		c.remember(a2a.TaskID("t"+strconv.Itoa(i)), &taskMemory{version: 1}, true)
	}
	if n := len(c.tasks); n != maxCodecTasks {
		t.Fatalf("%d tasks remembered, want %d", n, maxCodecTasks)
	}
}

// FuzzEncodeTaskRecord checks the codec's writes against json.Marshal on
// any record the store can decode, written whole and again as a delta
// after a status update.
func FuzzEncodeTaskRecord(f *testing.F) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History:   []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))},
		Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"k": 1.0})}}}}
	good, _ := json.Marshal(record.Task{Owner: tasks.Owner{Principal: "p"}, Version: 3, Updated: time.Unix(1, 0), Task: task})
	f.Add(good)
	f.Add([]byte(`{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING"},"history":[{"parts":[{"raw":"AA=="}]}],"artifacts":[{"artifactId":"x"}]}}`))
	f.Add([]byte(`{"owner":{"principal":"<p>"},"task":{"id":"t1","metadata":{"a":[1,"\u2028"]},"status":{"state":"TASK_STATE_SUBMITTED"}}}`))
	rs := newRecordStore(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := record.Decode("t1", b)
		if err != nil || slices.Contains(snap.Task.History, nil) || slices.Contains(snap.Task.Artifacts, nil) {
			return // nil entries are not what Apply makes
		}
		if _, err := json.Marshal(record.Task{Owner: snap.Owner, Version: snap.Version, Updated: snap.Updated, Task: snap.Task}); err != nil {
			return // not encodable at all (a time out of range): nothing to compare
		}
		c := newRecordCodec()
		sameRecord(t, c, rs, snap, snap.Task)
		ev := a2a.NewStatusUpdateEvent(snap.Task, a2a.TaskStateWorking, nil)
		next, err := tasks.Apply(snap, ev, time.Unix(2, 0))
		if err != nil {
			return
		}
		sameRecord(t, c, rs, next, ev)
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

// decodeWhole decodes rec for decodedCache.decode.
func decodeWhole(id a2a.TaskID, rec []byte) func() (*tasks.Snapshot, int, error) {
	return func() (*tasks.Snapshot, int, error) {
		snap, err := record.Decode(id, rec)
		return snap, len(rec), err
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
		if _, err := c.decode(id, rec, decodeWhole(id, rec)); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, e := range c.entries {
		total += e.size
	}
	if total != c.size || c.size > maxDecodedBytes || len(c.entries) == 0 {
		t.Fatalf("cache holds %d bytes in %d entries (counted %d), budget %d", total, len(c.entries), c.size, maxDecodedBytes)
	}
	big, _ := json.Marshal(record.Task{Task: &a2a.Task{ID: "big", ContextID: "c", Metadata: map[string]any{"f": strings.Repeat("y", maxDecodedRecord)}}})
	if _, err := c.decode("big", big, decodeWhole("big", big)); err != nil {
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
	batch, err := encodeEvents(evs)
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
	batch, _ := encodeEvents([]a2a.Event{a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil), a2a.NewArtifactEvent(task, a2a.NewTextPart("x"))})
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
		again, err := encodeEvents(evs)
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

// TestBigWriteEventsCut checks that a write of many events is stored in
// values of at most about maxEventValue, and reads back whole from any
// position; and that an artifact of many parts is kept in chunks of about
// maxChunk that read back as the artifact.
func TestBigWriteEventsCut(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	owner := tasks.Owner{Principal: "p"}
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	snap, err := tasks.Apply(nil, task, time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	snap.Owner = owner
	evs := []a2a.Event{task}
	for i := range 2000 {
		ev := a2a.NewArtifactUpdateEvent(task, "out", a2a.NewTextPart("part "+strconv.Itoa(i)+" "+strings.Repeat("x", 100)))
		ev.Append = i > 0
		if snap, err = tasks.Apply(snap, ev, time.Unix(2, 0)); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	snap.Version = uint64(len(evs))
	if err := s.Append(t.Context(), snap, evs); err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{0, 1, 299, 300, 1000, 2000} {
		got, err := s.Events(t.Context(), owner, "t1", after)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(evs)-int(after) || len(got) > 0 && got[0].Seq != after+1 {
			t.Fatalf("after %d: %d events from %v", after, len(got), got[0].Seq)
		}
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		for _, b := range []struct {
			name []byte
			max  int
			min  int
		}{{bucketEvents, maxEventValue + 1024, 5}, {bucketPieces, maxChunk + 1024, 10}} {
			n := 0
			err := tx.Bucket(b.name).ForEach(func(k, v []byte) error {
				n++
				if len(v) > b.max {
					return fmt.Errorf("%s: a value of %d bytes", b.name, len(v))
				}
				return nil
			})
			if err != nil {
				return err
			}
			if n < b.min {
				return fmt.Errorf("%s: %d values, want at least %d", b.name, n, b.min)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), owner, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if g, w := recordJSON(t, got), recordJSON(t, snap); g != w {
		t.Fatalf("artifact read back differs:\n got %.300s\nwant %.300s", g, w)
	}
}
