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
)

// maxCodecTasks bounds how many running tasks the record codec remembers.
const maxCodecTasks = 4096

// recordCodec writes the bbolt store's task writes and events. It remembers
// what each running task's last stored write left (taskMemory), so that the
// next append writes only what its events add (see delta); a task is
// forgotten once it is neither submitted nor working.
type recordCodec struct {
	mu    sync.Mutex
	tasks map[a2a.TaskID]*taskMemory
}

func newRecordCodec() *recordCodec {
	return &recordCodec{tasks: map[a2a.TaskID]*taskMemory{}}
}

// eventBatchV1 opens a value of the events bucket that holds the events of
// one write: each a 4-byte big-endian length and the event's JSON, the first
// at the key's sequence number. A value that starts otherwise ('{') is one
// event, as stores before it wrote them. One value per write, not per event,
// spares bbolt a cursor, a search and a key copy for every event.
const eventBatchV1 = 0x01

// encodeEvents returns events as one value of the events bucket, each event
// in its a2a.StreamResponse form.
func encodeEvents(events []a2a.Event) ([]byte, error) {
	buf := make([]byte, 1, 1+260*len(events))
	buf[0] = eventBatchV1
	for _, ev := range events {
		buf = append(buf, 0, 0, 0, 0)
		at := len(buf)
		var err error
		if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && e != nil && e.Artifact != nil {
			buf, _, _, err = a2ajson.AppendArtifactUpdate(buf, e)
		} else {
			buf, err = a2ajson.AppendStreamResponse(buf, ev)
		}
		if err != nil {
			return nil, err
		}
		if len(buf)-at > math.MaxUint32 {
			return nil, fmt.Errorf("event of %d bytes", len(buf)-at)
		}
		binary.BigEndian.PutUint32(buf[at-4:], uint32(len(buf)-at))
	}
	return buf, nil
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

// appendRecord appends the record of next with t as its task, as
// record.Decode reads it: byte for byte json.Marshal(record.Task).
func appendRecord(b []byte, next *tasks.Snapshot, t *a2a.Task) ([]byte, error) {
	var err error
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
	if b, err = a2ajson.AppendTaskEncoded(b, t, nil, nil); err != nil {
		return nil, fmt.Errorf("encode task: %w", err)
	}
	return append(b, '}'), nil
}

// remember keeps mem, what the task's write that was just stored left, for
// its next append while it runs, and forgets the task otherwise (mem nil:
// the write failed). A full codec forgets an arbitrary task: the cost is
// writing that task whole once more.
func (c *recordCodec) remember(id a2a.TaskID, mem *taskMemory, running bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rememberLocked(id, mem, running)
}

func (c *recordCodec) rememberLocked(id a2a.TaskID, mem *taskMemory, running bool) {
	if !running || mem == nil {
		delete(c.tasks, id)
		return
	}
	if _, ok := c.tasks[id]; !ok && len(c.tasks) >= maxCodecTasks {
		for old := range c.tasks {
			delete(c.tasks, old)
			break
		}
	}
	c.tasks[id] = mem
}

// maxDecodedBytes bounds the records the decoded-snapshot cache holds, and
// maxDecodedRecord the size of one record it takes.
const (
	maxDecodedBytes  = 4 << 20
	maxDecodedRecord = 64 << 10
)

// decodedCache keeps the snapshots the store decoded for reads, with the
// head bytes each came from. A read that finds the same head stored returns
// the same snapshot without decoding: snapshots handed out are immutable,
// and a head names the task's version, whose pieces never change, so
// nothing else (writes by other code) needs tracking.
type decodedCache struct {
	mu      sync.Mutex
	entries map[a2a.TaskID]decodedEntry
	size    int
}

type decodedEntry struct {
	rec  []byte // the task's stored head (or whole record)
	size int    // of the record decoded
	snap *tasks.Snapshot
}

func newDecodedCache() *decodedCache {
	return &decodedCache{entries: map[a2a.TaskID]decodedEntry{}}
}

// decode returns the snapshot of task id whose stored head is key, from
// the cache when key is the head it last decoded for id, else from build,
// which returns the snapshot and the size of the record it decoded. key is
// only read during the call.
func (c *decodedCache) decode(id a2a.TaskID, key []byte, build func() (*tasks.Snapshot, int, error)) (*tasks.Snapshot, error) {
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && bytes.Equal(e.rec, key) {
		return e.snap, nil
	}
	snap, size, err := build()
	if err != nil || size > maxDecodedRecord {
		return snap, err
	}
	c.put(id, decodedEntry{rec: bytes.Clone(key), size: size, snap: snap})
	return snap, nil
}

// forget drops what the cache holds of task id (a purged task).
func (c *decodedCache) forget(id a2a.TaskID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[id]; ok {
		c.size -= old.size
		delete(c.entries, id)
	}
}

// put stores e, forgetting arbitrary entries while the cache is over budget.
func (c *decodedCache) put(id a2a.TaskID, e decodedEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[id]; ok {
		c.size -= old.size
	}
	c.entries[id] = e
	c.size += e.size
	for other, o := range c.entries {
		if c.size <= maxDecodedBytes {
			break
		}
		if other != id {
			delete(c.entries, other)
			c.size -= o.size
		}
	}
}
