package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/a2ajson"
	"github.com/handoff-a2a/handoff/tasks"
)

// A task is stored in pieces, so that an event costs what it adds, not the
// task's length: its head in bucketTasks (the record without history and
// artifacts, with their counts) and, in bucketPieces, each history entry
// once, each artifact's fields up to its parts, and its parts in chunks, one
// per write that appended to it. A store written before keeps whole records
// (JSON, '{' first) in bucketTasks; they read as they are, and a task's next
// append rewrites it in pieces.
//
// bucketPieces keys: task id, 0, then
//
//	pieceHistory, index (uint32)             → the message's JSON
//	pieceArtifact, index (uint32)            → uvarint chunk count, the artifact's JSON up to its parts
//	pieceChunk, artifact, chunk (uint32s)    → parts' JSON, comma separated
const (
	pieceArtifact = 'a'
	pieceChunk    = 'c'
	pieceHistory  = 'h'
)

// splitV1 opens a task head in bucketTasks (splitV1, uvarint log sequence
// number of the write that made it, uvarint history count, uvarint artifact
// count, the head record's JSON: the sequence number makes every write's
// head differ, which the read cache relies on) and a log record's task
// write (a taskDelta, see appendDelta).
const splitV1 = 0x02

// partsNull ends an artifact encoded without parts; the stored artifact is
// what precedes it, its parts written after it on reading.
const partsNull = `"parts":null}`

// taskDelta is what one append writes of a task: its head, the history
// entries from histBase on, and the artifacts that changed. full says the
// task is written whole: every piece stored before is dropped.
type taskDelta struct {
	full     bool
	head     []byte // record JSON of the task without history and artifacts
	histBase int
	hist     [][]byte
	arts     int // the task's artifact count after the append
	ops      []artOp
}

// artOp writes artifact idx: whole (replace), or more chunks of parts
// (chunkBase is then the chunk count stored).
type artOp struct {
	idx       int
	appendTo  bool
	chunkBase int
	prefix    []byte   // the artifact's JSON up to its parts
	chunks    [][]byte // parts' JSON, comma separated; none with nilParts
	nilParts  bool     // replace only: the artifact has no parts (null)
}

// maxChunk bounds a chunk of parts (but for one part larger alone): bbolt
// rewrites a leaf whole, with its values, when a key is added to it, and a
// chunk's leaf takes the next chunk's key.
const maxChunk = 16 << 10

func appendBytes(b, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// encode returns d as a log record's task write.
func (d *taskDelta) encode() []byte {
	size := 32 + len(d.head)
	for _, h := range d.hist {
		size += len(h) + 4
	}
	for _, op := range d.ops {
		size += len(op.prefix) + 16
		for _, c := range op.chunks {
			size += len(c) + 4
		}
	}
	b := make([]byte, 0, size)
	b = append(b, splitV1)
	if d.full {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendBytes(b, d.head)
	b = binary.AppendUvarint(b, uint64(d.histBase))
	b = binary.AppendUvarint(b, uint64(len(d.hist)))
	for _, h := range d.hist {
		b = appendBytes(b, h)
	}
	b = binary.AppendUvarint(b, uint64(d.arts))
	b = binary.AppendUvarint(b, uint64(len(d.ops)))
	for _, op := range d.ops {
		b = binary.AppendUvarint(b, uint64(op.idx))
		switch {
		case op.appendTo:
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(op.chunkBase))
		case op.nilParts:
			b = append(b, 2)
		default:
			b = append(b, 0)
		}
		b = appendBytes(b, op.prefix)
		b = binary.AppendUvarint(b, uint64(len(op.chunks)))
		for _, c := range op.chunks {
			b = appendBytes(b, c)
		}
	}
	return b
}

// byteReader reads what taskDelta.encode and the head writers write.
type byteReader struct {
	b   []byte
	err error
}

func (r *byteReader) uvarint() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b))+1<<32 {
		r.err = errors.New("bad number")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *byteReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("cut short")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *byteReader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = errors.New("cut short")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// decodeDelta reads a log record's task write in the split form.
func decodeDelta(b []byte) (*taskDelta, error) {
	if len(b) < 2 || b[0] != splitV1 || b[1] > 1 {
		return nil, fmt.Errorf("%w: task write of an unknown form", tasks.ErrCorrupt)
	}
	r := &byteReader{b: b[2:]}
	d := &taskDelta{full: b[1] == 1, head: r.bytes(), histBase: r.uvarint()}
	n := r.uvarint()
	for i := 0; i < n && r.err == nil; i++ {
		d.hist = append(d.hist, r.bytes())
	}
	d.arts = r.uvarint()
	n = r.uvarint()
	for i := 0; i < n && r.err == nil; i++ {
		op := artOp{idx: r.uvarint()}
		switch r.byte() {
		case 0:
		case 1:
			op.appendTo, op.chunkBase = true, r.uvarint()
		case 2:
			op.nilParts = true
		default:
			r.err = errors.New("bad artifact write")
		}
		op.prefix = r.bytes()
		n := r.uvarint()
		for j := 0; j < n && r.err == nil; j++ {
			op.chunks = append(op.chunks, r.bytes())
		}
		if r.err == nil && op.nilParts != (n == 0) {
			r.err = errors.New("bad artifact chunks")
		}
		d.ops = append(d.ops, op)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: task write: %v", tasks.ErrCorrupt, r.err)
	}
	return d, nil
}

func pieceKey(id a2a.TaskID, kind byte, idx ...int) []byte {
	b := make([]byte, 0, len(id)+2+4*len(idx))
	b = append(append(append(b, id...), 0), kind)
	for _, i := range idx {
		b = binary.BigEndian.AppendUint32(b, uint32(i))
	}
	return b
}

// splitHead is a task head of bucketTasks, decoded.
type splitHead struct {
	hist, arts int
	rec        []byte
}

func decodeSplitHead(v []byte) (splitHead, error) {
	r := &byteReader{b: v[1:]}
	r.uvarint() // the write's sequence number
	h := splitHead{hist: r.uvarint(), arts: r.uvarint()}
	h.rec = r.b
	if r.err != nil || !bytes.HasSuffix(h.rec, []byte("}}")) {
		return splitHead{}, fmt.Errorf("%w: task head", tasks.ErrCorrupt)
	}
	return h, nil
}

func encodeSplitHead(seq uint64, hist, arts int, rec []byte) []byte {
	b := make([]byte, 0, len(rec)+20)
	b = append(b, splitV1)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(hist))
	b = binary.AppendUvarint(b, uint64(arts))
	return append(b, rec...)
}

// writeTask applies the task write rec of log record seq to task id in bbolt: a
// whole record (a log written before pieces) as it is, or a taskDelta. A
// delta that does not follow what is stored is refused.
func writeTask(tx *bolt.Tx, id a2a.TaskID, seq uint64, rec []byte) error {
	taskb, pieces := tx.Bucket(bucketTasks), tx.Bucket(bucketPieces)
	taskb.FillPercent, pieces.FillPercent = 0.9, 0.9
	if len(rec) > 0 && rec[0] == '{' {
		// Only a task stored in pieces has pieces to drop.
		if old := taskb.Get([]byte(id)); len(old) > 0 && old[0] == splitV1 {
			if err := deletePrefix(pieces, append([]byte(id), 0)); err != nil {
				return err
			}
		}
		return taskb.Put([]byte(id), rec)
	}
	d, err := decodeDelta(rec)
	if err != nil {
		return err
	}
	old := taskb.Get([]byte(id))
	if d.full {
		// Only a task stored in pieces has pieces: a new one, or one stored
		// whole, spares the cursor.
		if len(old) > 0 && old[0] == splitV1 {
			if err := deletePrefix(pieces, append([]byte(id), 0)); err != nil {
				return err
			}
		}
	} else {
		if len(old) == 0 || old[0] != splitV1 {
			return fmt.Errorf("%w: a task write in pieces onto a task stored whole", tasks.ErrCorrupt)
		}
		h, err := decodeSplitHead(old)
		if err != nil {
			return err
		}
		if h.hist != d.histBase || h.arts > d.arts {
			return fmt.Errorf("%w: a task write in pieces that does not follow the stored task (history %d, not %d)", tasks.ErrCorrupt, h.hist, d.histBase)
		}
	}
	for i, m := range d.hist {
		if err := pieces.Put(pieceKey(id, pieceHistory, d.histBase+i), m); err != nil {
			return err
		}
	}
	for _, op := range d.ops {
		if op.idx >= d.arts {
			return fmt.Errorf("%w: task write of artifact %d of %d", tasks.ErrCorrupt, op.idx, d.arts)
		}
		chunks := 0
		if op.appendTo {
			v := pieces.Get(pieceKey(id, pieceArtifact, op.idx))
			r := &byteReader{b: v}
			if n := r.uvarint(); v == nil || r.err != nil || n != op.chunkBase {
				return fmt.Errorf("%w: an append to artifact %d that does not follow the stored one", tasks.ErrCorrupt, op.idx)
			}
			chunks = op.chunkBase
		} else if err := deletePrefix(pieces, pieceKey(id, pieceChunk, op.idx)); err != nil {
			return err
		}
		for _, c := range op.chunks {
			if err := pieces.Put(pieceKey(id, pieceChunk, op.idx, chunks), c); err != nil {
				return err
			}
			chunks++
		}
		v := append(binary.AppendUvarint(make([]byte, 0, len(op.prefix)+4), uint64(chunks)), op.prefix...)
		if err := pieces.Put(pieceKey(id, pieceArtifact, op.idx), v); err != nil {
			return err
		}
	}
	return taskb.Put([]byte(id), encodeSplitHead(seq, d.histBase+len(d.hist), d.arts, d.head))
}

// readShape says how much of a task a read needs: the newest hist entries
// of its history (all when negative) and its artifacts unless noArts.
type readShape struct {
	hist   int
	noArts bool
}

var wholeTask = readShape{hist: -1}

// storedRecord returns the record JSON (as record.Decode reads it) of task
// id, whose bucketTasks value is v, with what shape asks for.
func storedRecord(tx *bolt.Tx, id a2a.TaskID, v []byte, shape readShape) ([]byte, error) {
	rec, _, err := storedRecordChunks(tx, id, v, shape)
	return rec, err
}

// storedRecordChunks is storedRecord that also returns, for a task stored
// in pieces read with its artifacts, each artifact's chunk count; nil for
// a task stored whole.
func storedRecordChunks(tx *bolt.Tx, id a2a.TaskID, v []byte, shape readShape) ([]byte, []int, error) {
	if len(v) == 0 || v[0] != splitV1 {
		return v, nil, nil // stored whole; record.Decode refuses what is not a record
	}
	h, err := decodeSplitHead(v)
	if err != nil {
		return nil, nil, fmt.Errorf("decode task %s: %w", id, err)
	}
	chunks := make([]int, 0, h.arts)
	pieces := tx.Bucket(bucketPieces)
	b := make([]byte, 0, len(h.rec)+64)
	b = append(b, h.rec[:len(h.rec)-2]...)
	if h.arts > 0 && !shape.noArts {
		b = append(b, `,"artifacts":[`...)
		for i := range h.arts {
			if i > 0 {
				b = append(b, ',')
			}
			var n int
			if b, n, err = appendStoredArtifact(b, pieces, id, i); err != nil {
				return nil, nil, err
			}
			chunks = append(chunks, n)
		}
		b = append(b, ']')
	}
	from := 0
	if shape.hist >= 0 {
		from = max(0, h.hist-shape.hist)
	}
	if from < h.hist {
		b = append(b, `,"history":[`...)
		c := pieces.Cursor()
		i := from
		for k, m := c.Seek(pieceKey(id, pieceHistory, from)); i < h.hist; k, m = c.Next() {
			if !bytes.Equal(k, pieceKey(id, pieceHistory, i)) {
				return nil, nil, fmt.Errorf("decode task %s: %w: history entry %d missing", id, tasks.ErrCorrupt, i)
			}
			if i > from {
				b = append(b, ',')
			}
			b = append(b, m...)
			i++
		}
		b = append(b, ']')
	}
	return append(b, "}}"...), chunks, nil
}

// appendStoredArtifact appends artifact i of task id, its parts joined, and
// returns its chunk count.
func appendStoredArtifact(b []byte, pieces *bolt.Bucket, id a2a.TaskID, i int) ([]byte, int, error) {
	v := pieces.Get(pieceKey(id, pieceArtifact, i))
	r := &byteReader{b: v}
	chunks := r.uvarint()
	if v == nil || r.err != nil {
		return nil, 0, fmt.Errorf("decode task %s: %w: artifact %d missing", id, tasks.ErrCorrupt, i)
	}
	b = append(b, r.b...)
	if chunks == 0 {
		return append(b, partsNull...), 0, nil
	}
	b = append(b, `"parts":[`...)
	prefix := pieceKey(id, pieceChunk, i)
	c := pieces.Cursor()
	j, first := 0, true
	for k, p := c.Seek(prefix); j < chunks; k, p = c.Next() {
		if !bytes.Equal(k, pieceKey(id, pieceChunk, i, j)) {
			return nil, 0, fmt.Errorf("decode task %s: %w: chunk %d of artifact %d missing", id, tasks.ErrCorrupt, j, i)
		}
		if len(p) > 0 {
			if !first {
				b = append(b, ',')
			}
			b, first = append(b, p...), false
		}
		j++
	}
	return append(b, "]}"...), chunks, nil
}

// deltaRecord returns the record JSON of what d writes: its head with the
// history entries and artifacts (their new parts only) it carries. Blob
// references are read from it.
func deltaRecord(d *taskDelta) []byte {
	b := append([]byte(nil), d.head[:len(d.head)-2]...)
	if len(d.ops) > 0 {
		b = append(b, `,"artifacts":[`...)
		for i, op := range d.ops {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, op.prefix...)
			if op.nilParts {
				b = append(b, partsNull...)
				continue
			}
			b = append(b, `"parts":[`...)
			first := true
			for _, c := range op.chunks {
				if len(c) > 0 {
					if !first {
						b = append(b, ',')
					}
					b, first = append(b, c...), false
				}
			}
			b = append(b, "]}"...)
		}
		b = append(b, ']')
	}
	if len(d.hist) > 0 {
		b = append(b, `,"history":[`...)
		for i, m := range d.hist {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m...)
		}
		b = append(b, ']')
	}
	return append(b, "}}"...)
}

// recordOf returns the record JSON a log record's task write holds: as it
// is when whole, what a delta writes otherwise.
func recordOf(rec []byte) ([]byte, error) {
	if len(rec) == 0 || rec[0] != splitV1 {
		return rec, nil
	}
	d, err := decodeDelta(rec)
	if err != nil {
		return nil, err
	}
	return deltaRecord(d), nil
}

// taskMemory is what the codec remembers of a running task's last stored
// write, to write the next one as a delta: counts and the pointers Apply
// keeps from one snapshot to the next, never the task's whole history.
type taskMemory struct {
	version  uint64
	hist     int
	lastHist *a2a.Message
	arts     []artMemory
}

type artMemory struct {
	a        *a2a.Artifact
	parts    int
	lastPart *a2a.Part
	chunks   int
}

// encodeArtifact returns a's JSON up to its parts, and the JSON of parts
// in chunks of about maxChunk at most (comma separated, without brackets);
// no chunks for nil parts.
func encodeArtifact(a *a2a.Artifact, parts []*a2a.Part) (prefix []byte, chunks [][]byte, err error) {
	c := *a
	c.Parts = nil
	head, err := a2ajson.AppendArtifact(nil, &c)
	if err != nil || !bytes.HasSuffix(head, []byte(partsNull)) {
		return nil, nil, fmt.Errorf("encode artifact %s: %w", a.ID, orUnexpected(err))
	}
	prefix = head[:len(head)-len(partsNull)]
	if parts == nil {
		return prefix, nil, nil
	}
	open := len(prefix) + len(`"parts":[`)
	// Each part encoded alone, as the only part of the artifact, and its
	// JSON taken from between the brackets.
	var chunk []byte
	one := make([]*a2a.Part, 1)
	c.Parts = one
	for _, p := range parts {
		one[0] = p
		whole, err := a2ajson.AppendArtifact(make([]byte, 0, len(head)+64), &c)
		if err != nil || len(whole) < open+2 || !bytes.Equal(whole[:len(prefix)], prefix) {
			return nil, nil, fmt.Errorf("encode artifact %s: %w", a.ID, orUnexpected(err))
		}
		pj := whole[open : len(whole)-2]
		if len(chunk) > 0 && len(chunk)+1+len(pj) > maxChunk {
			chunks, chunk = append(chunks, chunk), nil
		}
		if len(chunk) > 0 {
			chunk = append(chunk, ',')
		}
		chunk = append(chunk, pj...)
	}
	return prefix, append(chunks, chunk), nil
}

func orUnexpected(err error) error {
	if err != nil {
		return err
	}
	return errors.New("unexpected encoding")
}

// delta returns the write of next, which follows the stored version
// next.Version-len(events), and what to remember of it once stored. It is
// a delta when the codec remembers that version and the events only add to
// it (status updates append to the history, artifact updates replace an
// artifact or append parts to it); otherwise the task is written whole.
func (c *recordCodec) delta(next *tasks.Snapshot, events []a2a.Event) (*taskDelta, *taskMemory, error) {
	t := next.Task
	c.mu.Lock()
	mem := c.tasks[t.ID]
	c.mu.Unlock()
	head := *t
	head.History, head.Artifacts = nil, nil
	rec, err := appendRecord(make([]byte, 0, 512), next, &head)
	if err != nil {
		return nil, nil, err
	}
	d := &taskDelta{head: rec, arts: len(t.Artifacts)}
	appended := map[a2a.ArtifactID]bool{}
	if mem == nil || len(events) == 0 || mem.version != next.Version-uint64(len(events)) ||
		len(t.History) < mem.hist || mem.hist > 0 && t.History[mem.hist-1] != mem.lastHist || len(t.Artifacts) < len(mem.arts) {
		mem = nil
	}
	for _, ev := range events {
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
		case *a2a.TaskArtifactUpdateEvent:
			if e.Artifact != nil {
				// Appended to only if every event of the write appends to it.
				prev, ok := appended[e.Artifact.ID]
				appended[e.Artifact.ID] = e.Append && (prev || !ok)
			}
		default:
			mem = nil // a task event replaces everything
		}
	}
	if mem == nil {
		d.full = true
		mem = &taskMemory{}
	}
	nm := &taskMemory{version: next.Version, hist: len(t.History), arts: make([]artMemory, len(t.Artifacts))}

	if len(t.History) > 0 {
		nm.lastHist = t.History[len(t.History)-1]
	}
	d.histBase = mem.hist
	for _, m := range t.History[mem.hist:] {
		b, err := a2ajson.AppendMessage(nil, m)
		if err != nil {
			return nil, nil, fmt.Errorf("encode history: %w", err)
		}
		d.hist = append(d.hist, b)
	}
	for i, a := range t.Artifacts {
		am := artMemory{a: a, parts: len(a.Parts)}
		if len(a.Parts) > 0 {
			am.lastPart = a.Parts[len(a.Parts)-1]
		}
		if i < len(mem.arts) && mem.arts[i].a == a {
			nm.arts[i] = mem.arts[i]
			continue
		}
		op := artOp{idx: i}
		if i < len(mem.arts) {
			if m := mem.arts[i]; m.a.ID == a.ID && appended[a.ID] && m.chunks > 0 && len(a.Parts) >= m.parts &&
				(m.parts == 0 || a.Parts[m.parts-1] == m.lastPart) {
				op.appendTo, op.chunkBase = true, m.chunks
				if op.prefix, op.chunks, err = encodeArtifact(a, a.Parts[m.parts:]); err != nil {
					return nil, nil, err
				}
				am.chunks = m.chunks + len(op.chunks)
				d.ops = append(d.ops, op)
				nm.arts[i] = am
				continue
			}
		}
		if op.prefix, op.chunks, err = encodeArtifact(a, a.Parts); err != nil {
			return nil, nil, err
		}
		op.nilParts = a.Parts == nil
		am.chunks = len(op.chunks)
		d.ops = append(d.ops, op)
		nm.arts[i] = am
	}
	if len(events) == 0 {
		// A write of no events keeps the version: a delta after it could
		// not be told from one after the write before it, so the next
		// write is whole. Log recovery, which follows versions, then never
		// applies a delta onto a write it lost.
		return d, nil, nil
	}
	return d, nm, nil
}

// maxWholeRecord is the largest task written whole rather than in pieces:
// a short task (most are) is then one key, as before pieces, where in
// pieces it was a head and a key per history entry and artifact, which cost
// blocking sends at 64 about 10% of their throughput (handoff bench: 0.26-0.28x
// the limit against 0.29-0.30x). Past it a task goes to pieces and stays there.
const maxWholeRecord = 4 << 10

// small returns the whole record of next when the task is not stored in
// pieces (the codec remembers no write of it) and the record is at most
// maxWholeRecord; nil otherwise.
func (c *recordCodec) small(next *tasks.Snapshot) ([]byte, error) {
	c.mu.Lock()
	_, inPieces := c.tasks[next.Task.ID]
	c.mu.Unlock()
	if inPieces {
		return nil, nil
	}
	rec, err := appendRecord(make([]byte, 0, 1024), next, next.Task)
	if err != nil || len(rec) > maxWholeRecord {
		return nil, err
	}
	return rec, nil
}

// write returns the task write of next a log record carries: the whole
// record of a small task (small), else a delta or a whole write in pieces
// (delta); mem is what to remember of it once it is stored.
func (c *recordCodec) write(next *tasks.Snapshot, events []a2a.Event) (rec []byte, mem *taskMemory, err error) {
	if rec, err = c.small(next); err != nil || rec != nil {
		return rec, nil, err
	}
	d, mem, err := c.delta(next, events)
	if err != nil {
		return nil, nil, err
	}
	return d.encode(), mem, nil
}

// recall remembers snap, as read from bbolt in pieces with chunks (see
// storedRecordChunks), for its task's next append, unless the codec knows a
// later version: after a restart a running task's first append is then a
// delta too, when it follows the snapshot read.
func (c *recordCodec) recall(snap *tasks.Snapshot, chunks []int) {
	t := snap.Task
	if !tasks.IsUnfinished(t.Status.State) || len(chunks) != len(t.Artifacts) {
		return
	}
	m := &taskMemory{version: snap.Version, hist: len(t.History), arts: make([]artMemory, len(t.Artifacts))}
	if m.hist > 0 {
		m.lastHist = t.History[m.hist-1]
	}
	for i, a := range t.Artifacts {
		m.arts[i] = artMemory{a: a, parts: len(a.Parts), chunks: chunks[i]}
		if len(a.Parts) > 0 {
			m.arts[i].lastPart = a.Parts[len(a.Parts)-1]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.tasks[t.ID]; old == nil || old.version < m.version {
		c.rememberLocked(t.ID, m, true)
	}
}
