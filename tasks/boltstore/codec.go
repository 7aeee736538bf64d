package boltstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/a2ajson"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// maxCodecTasks bounds how many running tasks the record codec remembers.
const maxCodecTasks = 4096

// recordCodec writes the bbolt store's task records and events. A running
// task's snapshot shares its history messages and artifacts with the
// previous one (copy-on-write), and snapshots are immutable once published,
// so the codec keeps each running task's encoded messages and artifacts, by
// pointer, and encodes only the ones that are new: a status update no longer
// re-encodes the whole history, and a new artifact is encoded once, for its
// event, and reused in the record. Holding the pointers keeps them alive, so
// an address cannot be reused by another value while it is remembered. A
// task is forgotten once it is neither submitted nor working.
//
// Its records are byte for byte json.Marshal(record.Task) (the tests compare).
type recordCodec struct {
	mu    sync.Mutex
	tasks map[a2a.TaskID]*encodedTask
}

// encodedTask is what the codec remembers of a task's last record. It is
// never changed once stored: the next record gets a new one.
type encodedTask struct {
	history   []a2ajson.Encoded[a2a.Message]
	artifacts []a2ajson.Encoded[a2a.Artifact]
}

func newRecordCodec() *recordCodec {
	return &recordCodec{tasks: map[a2a.TaskID]*encodedTask{}}
}

// eventBatchV1 opens a value of the events bucket that holds the events of
// one write: each a 4-byte big-endian length and the event's JSON, the first
// at the key's sequence number. A value that starts otherwise ('{') is one
// event, as stores before it wrote them. One value per write, not per event,
// spares bbolt a cursor, a search and a key copy for every event.
const eventBatchV1 = 0x01

// encodeEvents returns events as one value of the events bucket, each event
// in its a2a.StreamResponse form, and the artifacts of artifact updates with
// their JSON in that value.
func encodeEvents(events []a2a.Event) ([]byte, []a2ajson.Encoded[a2a.Artifact], error) {
	buf := make([]byte, 1, 1+260*len(events))
	buf[0] = eventBatchV1
	type span struct {
		a          *a2a.Artifact
		start, end int
	}
	var spans []span
	for _, ev := range events {
		buf = append(buf, 0, 0, 0, 0)
		at := len(buf)
		var err error
		if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && e != nil && e.Artifact != nil {
			var start, end int
			if buf, start, end, err = a2ajson.AppendArtifactUpdate(buf, e); err != nil {
				return nil, nil, err
			}
			spans = append(spans, span{e.Artifact, start, end})
		} else if buf, err = a2ajson.AppendStreamResponse(buf, ev); err != nil {
			return nil, nil, err
		}
		if len(buf)-at > math.MaxUint32 {
			return nil, nil, fmt.Errorf("event of %d bytes", len(buf)-at)
		}
		binary.BigEndian.PutUint32(buf[at-4:], uint32(len(buf)-at))
	}
	arts := make([]a2ajson.Encoded[a2a.Artifact], len(spans))
	for i, s := range spans {
		arts[i] = a2ajson.Encoded[a2a.Artifact]{V: s.a, JSON: buf[s.start:s.end:s.end]}
	}
	return buf, arts, nil
}

// decodeEvents appends to out the events after seq after in v, a value of
// the events bucket whose first event has sequence number seq.
func decodeEvents(out []tasks.Event, seq, after uint64, v []byte) ([]tasks.Event, error) {
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: empty event value", tasks.ErrCorrupt)
	}
	if v[0] != eventBatchV1 {
		if seq <= after {
			return out, nil
		}
		return appendDecoded(out, seq, v)
	}
	v = v[1:]
	if len(v) == 0 {
		return nil, fmt.Errorf("%w: event batch without events", tasks.ErrCorrupt)
	}
	for ; len(v) > 0; seq++ {
		if len(v) < 4 {
			return nil, fmt.Errorf("%w: event batch cut short", tasks.ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(v)
		v = v[4:]
		if uint64(n) > uint64(len(v)) {
			return nil, fmt.Errorf("%w: event batch cut short", tasks.ErrCorrupt)
		}
		if seq > after {
			var err error
			if out, err = appendDecoded(out, seq, v[:n]); err != nil {
				return nil, err
			}
		}
		v = v[n:]
	}
	return out, nil
}

func appendDecoded(out []tasks.Event, seq uint64, b []byte) ([]tasks.Event, error) {
	var sr a2a.StreamResponse
	if err := json.Unmarshal(b, &sr); err != nil {
		return nil, fmt.Errorf("%w: event %d: %v", tasks.ErrCorrupt, seq, err)
	}
	return append(out, tasks.Event{Seq: seq, Event: sr.Event}), nil
}

// encode returns the record of next, as record.Decode reads it. known are
// artifacts already encoded for this write's events.
func (c *recordCodec) encode(next *tasks.Snapshot, known []a2ajson.Encoded[a2a.Artifact]) ([]byte, error) {
	t := next.Task
	c.mu.Lock()
	prev := c.tasks[t.ID]
	c.mu.Unlock()
	if prev == nil {
		prev = &encodedTask{}
	}

	enc := &encodedTask{}
	var err error
	if enc.history, err = encodeParts(prev.history, t.History, nil, a2ajson.AppendMessage); err != nil {
		return nil, fmt.Errorf("encode history: %w", err)
	}
	if enc.artifacts, err = encodeParts(prev.artifacts, t.Artifacts, known, a2ajson.AppendArtifact); err != nil {
		return nil, fmt.Errorf("encode artifacts: %w", err)
	}
	size := 256
	for _, p := range enc.history {
		size += len(p.JSON) + 1
	}
	for _, p := range enc.artifacts {
		size += len(p.JSON) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"owner":{"principal":`...)
	b = a2ajson.AppendString(b, next.Owner.Principal)
	if next.Owner.Tenant != "" {
		b = append(b, `,"tenant":`...)
		b = a2ajson.AppendString(b, next.Owner.Tenant)
	}
	b = append(b, `},"version":`...)
	b = strconv.AppendUint(b, next.Version, 10)
	b = append(b, `,"updated":`...)
	if b, err = a2ajson.AppendTime(b, next.Updated); err != nil {
		return nil, err
	}
	b = append(b, `,"task":`...)
	if b, err = a2ajson.AppendTaskEncoded(b, t, enc.artifacts, enc.history); err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	b = append(b, '}')

	c.remember(t.ID, enc, tasks.IsUnfinished(t.Status.State))
	return b, nil
}

// remember keeps enc for the task's next record while it runs, and forgets
// the task otherwise. A full codec forgets an arbitrary task: the cost is
// encoding that task's history once more.
func (c *recordCodec) remember(id a2a.TaskID, enc *encodedTask, running bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !running {
		delete(c.tasks, id)
		return
	}
	if _, ok := c.tasks[id]; !ok && len(c.tasks) >= maxCodecTasks {
		for old := range c.tasks {
			delete(c.tasks, old)
			break
		}
	}
	c.tasks[id] = enc
}

// encodeParts returns vs with their JSON: that of the value at the same
// index of prev when it is the very same pointer, else that of the same
// pointer in known, else newly written with appendTo. prev itself is
// returned when nothing changed.
func encodeParts[T any](prev []a2ajson.Encoded[T], vs []*T, known []a2ajson.Encoded[T], appendTo func([]byte, *T) ([]byte, error)) ([]a2ajson.Encoded[T], error) {
	if len(vs) == 0 {
		return nil, nil
	}
	if len(prev) == len(vs) {
		same := true
		for i, v := range vs {
			if prev[i].V != v {
				same = false
				break
			}
		}
		if same {
			return prev, nil
		}
	}
	out := make([]a2ajson.Encoded[T], len(vs))
	k := 0 // known follows the order of the events, as new values do
	for i, v := range vs {
		if i < len(prev) && prev[i].V == v {
			out[i] = prev[i]
			continue
		}
		if j := findPart(known, k, v); j >= 0 {
			out[i], k = known[j], j+1
			continue
		}
		b, err := appendTo(nil, v)
		if err != nil {
			return nil, err
		}
		out[i] = a2ajson.Encoded[T]{V: v, JSON: b}
	}
	return out, nil
}

// findPart returns the index of v in known, looking from from on first.
func findPart[T any](known []a2ajson.Encoded[T], from int, v *T) int {
	for j := from; j < len(known); j++ {
		if known[j].V == v {
			return j
		}
	}
	for j := range min(from, len(known)) {
		if known[j].V == v {
			return j
		}
	}
	return -1
}

// maxDecodedBytes bounds the records the decoded-snapshot cache holds, and
// maxDecodedRecord the size of one record it takes.
const (
	maxDecodedBytes  = 4 << 20
	maxDecodedRecord = 64 << 10
)

// decodedCache keeps the snapshots the store decoded for reads, with the
// record bytes each came from. A read that finds the same bytes stored
// returns the same snapshot without decoding: snapshots handed out are
// immutable, and equal bytes decode to equal snapshots, so nothing else
// (versions, writes by other code) needs tracking.
type decodedCache struct {
	mu      sync.Mutex
	entries map[a2a.TaskID]decodedEntry
	size    int
}

type decodedEntry struct {
	rec  []byte
	snap *tasks.Snapshot
}

func newDecodedCache() *decodedCache {
	return &decodedCache{entries: map[a2a.TaskID]decodedEntry{}}
}

// decode returns the snapshot stored as rec, from the cache when rec is the
// record it last decoded for id. rec is only read during the call.
func (c *decodedCache) decode(id a2a.TaskID, rec []byte) (*tasks.Snapshot, error) {
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && bytes.Equal(e.rec, rec) {
		return e.snap, nil
	}
	snap, err := record.Decode(id, rec)
	if err != nil || len(rec) > maxDecodedRecord {
		return snap, err
	}
	c.put(id, decodedEntry{rec: bytes.Clone(rec), snap: snap})
	return snap, nil
}

// forget drops what the cache holds of task id (a purged task).
func (c *decodedCache) forget(id a2a.TaskID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[id]; ok {
		c.size -= len(old.rec)
		delete(c.entries, id)
	}
}

// put stores e, forgetting arbitrary entries while the cache is over budget.
func (c *decodedCache) put(id a2a.TaskID, e decodedEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[id]; ok {
		c.size -= len(old.rec)
	}
	c.entries[id] = e
	c.size += len(e.rec)
	for other, o := range c.entries {
		if c.size <= maxDecodedBytes {
			break
		}
		if other != id {
			delete(c.entries, other)
			c.size -= len(o.rec)
		}
	}
}
