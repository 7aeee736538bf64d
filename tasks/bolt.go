package tasks

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"
)

// ErrInvalidPageToken means a ListQuery's PageToken was not made by this store.
var ErrInvalidPageToken = errors.New("invalid page token")

// ErrClosed is returned by a store's methods after Close.
var ErrClosed = errors.New("store closed")

var (
	bucketTasks      = []byte("tasks")      // task id → taskRecord (JSON)
	bucketHeads      = []byte("heads")      // task id → version, updated, owner key (binary)
	bucketEvents     = []byte("events")     // task id, 0, seq of the first → the events of one write (see eventBatchV1)
	bucketByOwner    = []byte("by_owner")   // owner key, inverted updated, task id → state, 0, context id
	bucketUnfinished = []byte("unfinished") // task id → nothing
	bucketPush       = []byte("push")       // task id, 0, config id → pushRecord (JSON)
)

// maxBatch bounds how many writes share one transaction and one fsync.
const maxBatch = 256

// BoltStore is a [Store] in one bbolt file. Writers queue their changes and a
// single committer applies everything queued in one transaction, so
// concurrent writers share an fsync without waiting for a timer (bbolt's own
// Batch waits up to MaxBatchDelay even when alone, which a lone blocking
// SendMessage would pay on every event).
type BoltStore struct {
	db     *bolt.DB
	mu     sync.RWMutex // guards closed and sends on writes
	closed bool
	writes chan *boltWrite
	done   chan struct{}
	codec  *recordCodec
	reads  *decodedCache
	sealer *Sealer // nil: push secrets stored as given
}

var _ Store = (*BoltStore)(nil)

type boltWrite struct {
	fn  func(*bolt.Tx) error
	res chan error
}

// OpenBolt opens (or creates) the store file at path. A file another process
// holds open is refused after timeout. [WithSealer] seals push secrets.
func OpenBolt(path string, timeout time.Duration, opts ...BoltOption) (*BoltStore, error) {
	var cfg boltConfig
	for _, o := range opts {
		o.applyBolt(&cfg)
	}
	// The free page list is not written with every commit but rebuilt by a
	// scan when the file is opened: written, it grows with the file and was
	// most of each commit's pages (a blocking send at 16 senders took about
	// 3x as long). Data and meta pages are fsynced as before. The map
	// freelist allocates in constant time instead of scanning an array.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open task store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketTasks, bucketHeads, bucketEvents, bucketByOwner, bucketUnfinished, bucketPush} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init task store %s: %w", path, err)
	}
	s := &BoltStore{db: db, writes: make(chan *boltWrite, maxBatch), done: make(chan struct{}), codec: newRecordCodec(), reads: newDecodedCache(), sealer: cfg.sealer}
	go s.commitLoop()
	return s, nil
}

// Ping reports whether the store is open; readiness checks use it.
func (s *BoltStore) Ping(context.Context) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Close waits for queued writes to commit and closes the file.
func (s *BoltStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.writes)
	s.mu.Unlock()
	<-s.done
	return s.db.Close()
}

func (s *BoltStore) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	w := &boltWrite{fn: fn, res: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.writes <- w:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	// Once queued the write commits or fails as a whole; waiting for it (not
	// for ctx) keeps "returned nil" meaning "durable".
	return <-w.res
}

// errRetryBatch rolls back a batch in which one write failed, so the others
// can be committed without it.
var errRetryBatch = errors.New("retry batch")

func (s *BoltStore) commitLoop() {
	defer close(s.done)
	batch := make([]*boltWrite, 0, maxBatch)
	for w := range s.writes {
		batch = append(batch[:0], w)
	fill:
		for len(batch) < maxBatch {
			select {
			case w, ok := <-s.writes:
				if !ok {
					break fill
				}
				batch = append(batch, w)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

func (s *BoltStore) commit(batch []*boltWrite) {
	failed := make(map[int]error)
	for {
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, w := range batch {
				if failed[i] != nil {
					continue
				}
				if err := w.fn(tx); err != nil {
					failed[i] = err
					return errRetryBatch
				}
			}
			return nil
		})
		if errors.Is(err, errRetryBatch) {
			continue
		}
		for i, w := range batch {
			if f := failed[i]; f != nil {
				w.res <- f
			} else {
				w.res <- err
			}
		}
		return
	}
}

type taskRecord struct {
	Owner   Owner     `json:"owner"`
	Version uint64    `json:"version"`
	Updated time.Time `json:"updated"`
	Task    *a2a.Task `json:"task"`
}

// pushRecord is a push config with its delivery state.
type pushRecord = PushDelivery

// ownerKey encodes an owner so that no principal or tenant can be a prefix
// of another's key.
func ownerKey(o Owner) []byte {
	b := binary.AppendUvarint(nil, uint64(len(o.Principal)))
	b = append(b, o.Principal...)
	b = binary.AppendUvarint(b, uint64(len(o.Tenant)))
	return append(b, o.Tenant...)
}

func eventKey(id a2a.TaskID, seq uint64) []byte {
	b := make([]byte, 0, len(id)+9)
	b = append(b, id...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

// indexSuffix orders newest first: the inverted timestamp sorts ascending.
func indexSuffix(updated time.Time, id a2a.TaskID) []byte {
	b := binary.BigEndian.AppendUint64(nil, math.MaxUint64-uint64(updated.UnixNano()))
	return append(b, id...)
}

type head struct {
	version uint64
	updated time.Time
	owner   []byte
}

func decodeHead(b []byte) (head, error) {
	if len(b) < 16 {
		return head{}, fmt.Errorf("task head of %d bytes: %w", len(b), ErrCorrupt)
	}
	return head{
		version: binary.BigEndian.Uint64(b),
		updated: time.Unix(0, int64(binary.BigEndian.Uint64(b[8:]))),
		owner:   bytes.Clone(b[16:]),
	}, nil
}

func encodeHead(version uint64, updated time.Time, owner []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, version)
	b = binary.BigEndian.AppendUint64(b, uint64(updated.UnixNano()))
	return append(b, owner...)
}

func isUnfinished(s a2a.TaskState) bool {
	return s == a2a.TaskStateSubmitted || s == a2a.TaskStateWorking
}

// Append implements [Store].
func (s *BoltStore) Append(ctx context.Context, next *Snapshot, events []a2a.Event) error {
	if next == nil || next.Task == nil || next.Task.ID == "" {
		return fmt.Errorf("append: snapshot without a task id")
	}
	id := next.Task.ID
	encoded, known, err := encodeEvents(events)
	if err != nil {
		return fmt.Errorf("append to task %s: encode event: %w", id, err)
	}
	rec, err := s.codec.encode(next, known)
	if err != nil {
		return fmt.Errorf("append to task %s: encode snapshot: %w", id, err)
	}
	ok := ownerKey(next.Owner)
	idxVal := append(append([]byte(next.Task.Status.State), 0), next.Task.ContextID...)
	err = s.update(ctx, func(tx *bolt.Tx) error {
		heads := tx.Bucket(bucketHeads)
		var prev uint64
		if hb := heads.Get([]byte(id)); hb != nil {
			h, err := decodeHead(hb)
			if err != nil {
				return err
			}
			if !bytes.Equal(h.owner, ok) {
				return ErrNotFound
			}
			prev = h.version
			if err := tx.Bucket(bucketByOwner).Delete(append(bytes.Clone(ok), indexSuffix(h.updated, id)...)); err != nil {
				return err
			}
		}
		if next.Version != prev+uint64(len(events)) {
			return ErrConflict
		}
		if len(events) > 0 {
			if err := tx.Bucket(bucketEvents).Put(eventKey(id, prev+1), encoded); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketTasks).Put([]byte(id), rec); err != nil {
			return err
		}
		if err := heads.Put([]byte(id), encodeHead(next.Version, next.Updated, ok)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketByOwner).Put(append(bytes.Clone(ok), indexSuffix(next.Updated, id)...), idxVal); err != nil {
			return err
		}
		if isUnfinished(next.Task.Status.State) {
			return tx.Bucket(bucketUnfinished).Put([]byte(id), nil)
		}
		return tx.Bucket(bucketUnfinished).Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("append to task %s: %w", id, err)
	}
	return nil
}

// decodeTaskRecord decodes a stored task and checks it is whole.
func decodeTaskRecord(id a2a.TaskID, b []byte) (*Snapshot, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("decode task %s: %w: %v", id, ErrCorrupt, err)
	}
	if r.Task == nil || r.Task.ID != id {
		return nil, fmt.Errorf("decode task %s: %w: id does not match", id, ErrCorrupt)
	}
	return &Snapshot{Task: r.Task, Owner: r.Owner, Version: r.Version, Updated: r.Updated}, nil
}

func (s *BoltStore) view(fn func(*bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.db.View(fn)
}

// Get implements [Store].
func (s *BoltStore) Get(_ context.Context, owner Owner, id a2a.TaskID) (*Snapshot, error) {
	snap, err := s.load(id)
	if err == nil && snap.Owner != owner {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return snap, nil
}

// OwnerOf implements [Store].
func (s *BoltStore) OwnerOf(_ context.Context, id a2a.TaskID) (Owner, error) {
	snap, err := s.load(id)
	if err != nil {
		return Owner{}, fmt.Errorf("owner of task %s: %w", id, err)
	}
	return snap.Owner, nil
}

// load reads a task's snapshot whoever owns it.
func (s *BoltStore) load(id a2a.TaskID) (*Snapshot, error) {
	var snap *Snapshot
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTasks).Get([]byte(id))
		if b == nil {
			return ErrNotFound
		}
		var err error
		snap, err = s.reads.decode(id, b)
		return err
	})
	return snap, err
}

// Events implements [Store].
func (s *BoltStore) Events(_ context.Context, owner Owner, id a2a.TaskID, after uint64) ([]Event, error) {
	var out []Event
	err := s.view(func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketHeads).Get([]byte(id))
		if hb == nil {
			return ErrNotFound
		}
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, ownerKey(owner)) {
			return ErrNotFound
		}
		prefix := append([]byte(id), 0)
		isEvent := func(k []byte) bool { return len(k) == len(prefix)+8 && bytes.HasPrefix(k, prefix) }
		start := eventKey(id, after+1)
		c := tx.Bucket(bucketEvents).Cursor()
		k, v := c.Seek(start)
		if !bytes.Equal(k, start) {
			// The write holding event after+1 may have started before it.
			if pk, pv := c.Prev(); isEvent(pk) {
				k, v = pk, pv
			} else {
				k, v = c.Seek(start)
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !isEvent(k) {
				continue
			}
			if out, err = decodeEvents(out, binary.BigEndian.Uint64(k[len(prefix):]), after, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", id, err)
	}
	return out, nil
}

// List implements [Store].
func (s *BoltStore) List(_ context.Context, q ListQuery) (*ListPage, error) {
	prefix := ownerKey(q.Owner)
	start := prefix
	if q.PageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil || len(tok) < 9 {
			return nil, ErrInvalidPageToken
		}
		start = append(append(bytes.Clone(prefix), tok...), 0) // just after the last one returned
	}
	pageSize := q.PageSize
	if pageSize <= 0 {
		pageSize = 50
	}
	page := &ListPage{}
	err := s.view(func(tx *bolt.Tx) error {
		tasks := tx.Bucket(bucketTasks)
		c := tx.Bucket(bucketByOwner).Cursor()
		var last []byte
		full := false
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			suffix := k[len(prefix):]
			if len(suffix) < 9 {
				continue
			}
			state, ctxID, _ := bytes.Cut(v, []byte{0})
			if q.State != "" && string(state) != string(q.State) {
				continue
			}
			if q.ContextID != "" && string(ctxID) != q.ContextID {
				continue
			}
			if q.UpdatedAfter != nil {
				updated := int64(math.MaxUint64 - binary.BigEndian.Uint64(suffix))
				if updated <= q.UpdatedAfter.UnixNano() {
					continue
				}
			}
			page.TotalSize++
			if bytes.Compare(k, start) < 0 {
				continue
			}
			if len(page.Tasks) == pageSize {
				page.NextPageToken = base64.RawURLEncoding.EncodeToString(last)
				full = true
			}
			if full {
				continue // keep counting TotalSize
			}
			id := a2a.TaskID(suffix[8:])
			snap, err := decodeTaskRecord(id, tasks.Get([]byte(id)))
			if err != nil {
				return err
			}
			page.Tasks = append(page.Tasks, snap)
			last = bytes.Clone(suffix)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return page, nil
}

// Unfinished implements [Store].
func (s *BoltStore) Unfinished(_ context.Context) ([]*Snapshot, error) {
	var out []*Snapshot
	err := s.view(func(tx *bolt.Tx) error {
		tasks := tx.Bucket(bucketTasks)
		return tx.Bucket(bucketUnfinished).ForEach(func(k, _ []byte) error {
			b := tasks.Get(k)
			if b == nil {
				return nil
			}
			snap, err := decodeTaskRecord(a2a.TaskID(k), b)
			if err != nil {
				return err
			}
			out = append(out, snap)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list unfinished tasks: %w", err)
	}
	return out, nil
}

func pushKey(task a2a.TaskID, id string) []byte {
	return append(append([]byte(task), 0), id...)
}

// ownerMatches reports whether the task exists and belongs to owner.
func ownerMatches(tx *bolt.Tx, owner Owner, task a2a.TaskID) (bool, error) {
	hb := tx.Bucket(bucketHeads).Get([]byte(task))
	if hb == nil {
		return false, nil
	}
	h, err := decodeHead(hb)
	if err != nil {
		return false, err
	}
	return bytes.Equal(h.owner, ownerKey(owner)), nil
}

// PutPushConfig implements [Store]. A new config starts delivering with
// the task's next event; replacing one keeps its delivery state.
func (s *BoltStore) PutPushConfig(ctx context.Context, owner Owner, cfg *a2a.PushConfig) error {
	cfg, err := s.sealer.seal(cfg)
	if err != nil {
		return fmt.Errorf("put push config: %w", err)
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		hb := tx.Bucket(bucketHeads).Get([]byte(cfg.TaskID))
		if hb == nil {
			return ErrNotFound
		}
		h, err := decodeHead(hb)
		if err != nil {
			return err
		}
		if !bytes.Equal(h.owner, ownerKey(owner)) {
			return ErrNotFound
		}
		rec := &pushRecord{Owner: owner, Config: cfg, Delivered: h.version}
		if old := tx.Bucket(bucketPush).Get(pushKey(cfg.TaskID, cfg.ID)); old != nil {
			if prev, err := decodePush(old); err == nil && prev.Owner == owner {
				prev.Config = cfg
				rec = prev
			}
		}
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketPush).Put(pushKey(cfg.TaskID, cfg.ID), b)
	})
	if err != nil {
		return fmt.Errorf("put push config of task %s: %w", cfg.TaskID, err)
	}
	return nil
}

// PushDeliveries implements [Store].
func (s *BoltStore) PushDeliveries(_ context.Context, task a2a.TaskID) ([]*PushDelivery, error) {
	var out []*PushDelivery
	err := s.view(func(tx *bolt.Tx) error {
		var prefix []byte
		if task != "" {
			prefix = append([]byte(task), 0)
		}
		c := tx.Bucket(bucketPush).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodePush(v)
			if err != nil {
				return err
			}
			if r.Config, err = s.sealer.open(r.Config); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read push deliveries: %w", err)
	}
	return out, nil
}

// UpdatePushDelivery implements [Store].
func (s *BoltStore) UpdatePushDelivery(ctx context.Context, d *PushDelivery) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		key := pushKey(d.Config.TaskID, d.Config.ID)
		old := tx.Bucket(bucketPush).Get(key)
		if old == nil {
			return ErrNotFound
		}
		prev, err := decodePush(old)
		if err != nil {
			return err
		}
		next := *d
		next.Owner, next.Config = prev.Owner, prev.Config // a concurrent replace of the config wins
		b, err := json.Marshal(&next)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketPush).Put(key, b)
	})
	if err != nil {
		return fmt.Errorf("update push delivery %s of task %s: %w", d.Config.ID, d.Config.TaskID, err)
	}
	return nil
}

func decodePush(b []byte) (*pushRecord, error) {
	var r pushRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Config == nil {
		return nil, fmt.Errorf("%w: push config", ErrCorrupt)
	}
	return &r, nil
}

// GetPushConfig implements [Store].
func (s *BoltStore) GetPushConfig(_ context.Context, owner Owner, task a2a.TaskID, id string) (*a2a.PushConfig, error) {
	var out *a2a.PushConfig
	err := s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPush).Get(pushKey(task, id))
		if b == nil {
			return ErrNotFound
		}
		r, err := decodePush(b)
		if err != nil {
			return err
		}
		if r.Owner != owner {
			return ErrNotFound
		}
		out, err = s.sealer.open(r.Config)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, err)
	}
	return out, nil
}

// ListPushConfigs implements [Store].
func (s *BoltStore) ListPushConfigs(_ context.Context, owner Owner, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	out := []*a2a.PushConfig{}
	err := s.view(func(tx *bolt.Tx) error {
		ok, err := ownerMatches(tx, owner, task)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		prefix := append([]byte(task), 0)
		c := tx.Bucket(bucketPush).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			r, err := decodePush(v)
			if err != nil {
				return err
			}
			if r.Owner == owner {
				cfg, err := s.sealer.open(r.Config)
				if err != nil {
					return err
				}
				out = append(out, cfg)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list push configs of task %s: %w", task, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeletePushConfig implements [Store].
func (s *BoltStore) DeletePushConfig(ctx context.Context, owner Owner, task a2a.TaskID, id string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPush).Get(pushKey(task, id))
		if b == nil {
			return ErrNotFound
		}
		r, err := decodePush(b)
		if err != nil {
			return err
		}
		if r.Owner != owner {
			return ErrNotFound
		}
		return tx.Bucket(bucketPush).Delete(pushKey(task, id))
	})
	if err != nil {
		return fmt.Errorf("delete push config %s of task %s: %w", id, task, err)
	}
	return nil
}
