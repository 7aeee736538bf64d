package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

var _ tasks.Purger = (*Store)(nil)

// keyLastPurge is where bbolt keeps when a purge last deleted tasks, how
// many, and how many all purges deleted (three big-endian uint64s).
var keyLastPurge = []byte("last_purge")

// finishedKey is a finished task's key in bucketFinished: its update time
// first, so the oldest come first.
func finishedKey(updated time.Time, id a2a.TaskID) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), uint64(updated.UnixNano()))
	return append(b, id...)
}

func blobRefKey(digest string, id a2a.TaskID) []byte {
	return append(append(append(make([]byte, 0, len(digest)+1+len(id)), digest...), 0), id...)
}

// indexRetained adds what retention needs of an applied append: the task
// in the finished index when its state is final, and the blobs it names.
// finished is nil in a store recovered before it had the index (Open
// builds it then).
func indexRetained(tx *bolt.Tx, finished *bolt.Bucket, a *walAppend, updated time.Time) error {
	state, _, _ := bytes.Cut(a.index, []byte{0})
	if finished != nil && a2a.TaskState(state).Terminal() {
		if err := finished.Put(finishedKey(updated, a.id), a.owner); err != nil {
			return err
		}
	}
	if refs := tx.Bucket(bucketBlobRefs); refs != nil {
		for _, d := range a.refs {
			if err := refs.Put(blobRefKey(d, a.id), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexFinished builds the finished index of a store made before it had
// one, from the tasks' heads and list index entries.
func indexFinished(tx *bolt.Tx) error {
	finished, byOwner := tx.Bucket(bucketFinished), tx.Bucket(bucketByOwner)
	return tx.Bucket(bucketHeads).ForEach(func(k, v []byte) error {
		h, err := decodeHead(v)
		if err != nil {
			return err
		}
		id := a2a.TaskID(k)
		state, _, _ := bytes.Cut(byOwner.Get(append(bytes.Clone(h.owner), indexSuffix(h.updated, id)...)), []byte{0})
		if !a2a.TaskState(state).Terminal() {
			return nil
		}
		return finished.Put(finishedKey(h.updated, id), h.owner)
	})
}

// blobNames returns the blobs the task write rec (a whole record, or what
// a log record writes: recordOf) names under x.
func blobNames(x *tasks.BlobIndex, id a2a.TaskID, rec []byte) []string {
	return x.Names(rec, func() (*a2a.Task, error) {
		whole, err := recordOf(rec)
		if err != nil {
			return nil, err
		}
		snap, err := record.Decode(id, whole)
		if err != nil {
			return nil, err
		}
		return snap.Task, nil
	})
}

// ownerFromKey decodes an owner key (record.OwnerKey).
func ownerFromKey(k []byte) (tasks.Owner, bool) {
	var o tasks.Owner
	for _, f := range []*string{&o.Principal, &o.Tenant} {
		n, w := binary.Uvarint(k)
		if w <= 0 || n > uint64(len(k)-w) {
			return tasks.Owner{}, false
		}
		*f, k = string(k[w:w+int(n)]), k[w+int(n):]
	}
	return o, len(k) == 0
}

// purgeHold is a purge's list of tasks as the committer holds it: it keeps
// the tasks no append waits for and marks them purging (held), so that no
// append to them is accepted before the purge applies.
type purgeHold struct {
	ids  []a2a.TaskID
	held bool
}

// holdForPurge takes, under the committer, the tasks of p that no accepted
// append waits for (in s.heads or earlier in this batch, moved) out of the
// hands of later appends.
func (s *Store) holdForPurge(p *purgeHold, moved map[a2a.TaskID]walHead) {
	s.amu.Lock()
	defer s.amu.Unlock()
	kept := p.ids[:0]
	for _, id := range p.ids {
		if _, ok := moved[id]; ok {
			continue
		}
		if _, ok := s.heads[id]; ok || s.purging[id] {
			continue
		}
		s.purging[id] = true
		kept = append(kept, id)
	}
	p.ids, p.held = kept, true
}

// Expired implements [tasks.Purger].
func (s *Store) Expired(_ context.Context, r tasks.Retention, now time.Time, limit int) ([]tasks.Expiring, error) {
	shortest := r.Shortest()
	if shortest == 0 || limit <= 0 {
		return nil, nil
	}
	horizon := now.Add(-shortest)
	var out []tasks.Expiring
	err := s.view(func(tx *bolt.Tx) error {
		byOwner := tx.Bucket(bucketByOwner)
		c := tx.Bucket(bucketFinished).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if len(k) < 9 {
				return fmt.Errorf("%w: finished index key of %d bytes", tasks.ErrCorrupt, len(k))
			}
			updated := time.Unix(0, int64(binary.BigEndian.Uint64(k)))
			if !updated.Before(horizon) {
				break
			}
			id := a2a.TaskID(k[8:])
			owner, ok := ownerFromKey(v)
			if !ok {
				return fmt.Errorf("%w: finished index entry of task %s", tasks.ErrCorrupt, id)
			}
			state, _, _ := bytes.Cut(byOwner.Get(append(bytes.Clone(v), indexSuffix(updated, id)...)), []byte{0})
			if r.Expired(owner.Tenant, a2a.TaskState(state), updated, now) {
				out = append(out, tasks.Expiring{ID: id, Owner: owner, State: a2a.TaskState(state), Updated: updated})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find expired tasks: %w", err)
	}
	return out, nil
}

// Purge implements [tasks.Purger]. It is one write on the store's write
// path: the committer refuses appends to the tasks from then on, and the
// applier deletes them in the transaction that applies what was queued
// before, so after a crash each task is whole or gone. It holds that
// transaction for about 20 µs a task (one with few events): callers pass a
// hundred or so.
func (s *Store) Purge(ctx context.Context, r tasks.Retention, now time.Time, ids []a2a.TaskID) (*tasks.PurgeResult, error) {
	if len(ids) == 0 {
		return &tasks.PurgeResult{}, nil
	}
	// Appends accepted before are applied first, so that the committer
	// need not leave their tasks out.
	if err := s.view(func(*bolt.Tx) error { return nil }); err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	hold := &purgeHold{ids: append([]a2a.TaskID(nil), ids...)}
	var res *tasks.PurgeResult
	w := &boltWrite{purge: hold}
	w.fn = func(tx *bolt.Tx) error {
		res = &tasks.PurgeResult{} // again when the applier retries the transaction
		for _, id := range hold.ids {
			exp, freed, err := purgeTask(tx, s.blobs, r, now, id)
			if err != nil {
				return fmt.Errorf("task %s: %w", id, err)
			}
			if exp != nil {
				res.Tasks = append(res.Tasks, *exp)
				res.Blobs = append(res.Blobs, freed...)
			}
		}
		if len(res.Tasks) == 0 {
			return nil
		}
		meta := tx.Bucket(bucketMeta)
		var total uint64
		if b := meta.Get(keyLastPurge); len(b) == 24 {
			total = binary.BigEndian.Uint64(b[16:])
		}
		b := binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
		b = binary.BigEndian.AppendUint64(b, uint64(len(res.Tasks)))
		return meta.Put(keyLastPurge, binary.BigEndian.AppendUint64(b, total+uint64(len(res.Tasks))))
	}
	err := s.update(ctx, w)
	s.amu.Lock()
	if hold.held {
		for _, id := range hold.ids {
			delete(s.purging, id)
		}
	}
	s.amu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	for _, t := range res.Tasks {
		s.reads.forget(t.ID)
	}
	return res, nil
}

// purgeTask deletes task id with everything bbolt holds of it when it is
// finished and past its window; it returns nil for a task that is not, and
// the blobs no other task names.
func purgeTask(tx *bolt.Tx, blobs *tasks.BlobIndex, r tasks.Retention, now time.Time, id a2a.TaskID) (*tasks.Expiring, []string, error) {
	key := []byte(id)
	heads, byOwner := tx.Bucket(bucketHeads), tx.Bucket(bucketByOwner)
	hb := heads.Get(key)
	if hb == nil {
		return nil, nil, nil
	}
	h, err := decodeHead(hb)
	if err != nil {
		return nil, nil, err
	}
	owner, ok := ownerFromKey(h.owner)
	if !ok {
		return nil, nil, fmt.Errorf("%w: owner key", tasks.ErrCorrupt)
	}
	ikey := append(bytes.Clone(h.owner), indexSuffix(h.updated, id)...)
	listed := byOwner.Get(ikey)
	state, _, _ := bytes.Cut(listed, []byte{0})
	if !r.Expired(owner.Tenant, a2a.TaskState(state), h.updated, now) {
		return nil, nil, nil
	}
	rec, err := storedRecord(tx, id, tx.Bucket(bucketTasks).Get(key), wholeTask)
	if err != nil {
		return nil, nil, err
	}
	refs := blobNames(blobs, id, rec)
	if listed != nil {
		if err := indexListed(tx, h.owner, ikey[len(h.owner):], listed, false); err != nil {
			return nil, nil, err
		}
	}
	prefix := append(bytes.Clone(key), 0)
	for _, b := range []*bolt.Bucket{tx.Bucket(bucketEvents), tx.Bucket(bucketPush), tx.Bucket(bucketPieces)} {
		if err := deletePrefix(b, prefix); err != nil {
			return nil, nil, err
		}
	}
	for _, d := range []struct {
		b []byte
		k []byte
	}{{bucketTasks, key}, {bucketHeads, key}, {bucketByOwner, ikey}, {bucketUnfinished, key}, {bucketFinished, finishedKey(h.updated, id)}} {
		if err := tx.Bucket(d.b).Delete(d.k); err != nil {
			return nil, nil, err
		}
	}
	var freed []string
	refb := tx.Bucket(bucketBlobRefs)
	for _, d := range refs {
		if err := refb.Delete(blobRefKey(d, id)); err != nil {
			return nil, nil, err
		}
		p := append([]byte(d), 0)
		if k, _ := refb.Cursor().Seek(p); !bytes.HasPrefix(k, p) {
			freed = append(freed, d)
		}
	}
	return &tasks.Expiring{ID: id, Owner: owner, State: a2a.TaskState(state), Updated: h.updated}, freed, nil
}

// deletePrefix deletes b's keys that start with prefix.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Stats implements [tasks.Purger]. Bytes counts the store file and its log.
func (s *Store) Stats(_ context.Context) (*tasks.StoreStats, error) {
	st := &tasks.StoreStats{ByState: map[a2a.TaskState]int{}}
	oldest := int64(math.MaxInt64)
	err := s.view(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketHeads).ForEach(func(k, v []byte) error {
			h, err := decodeHead(v)
			if err != nil {
				return err
			}
			id := a2a.TaskID(k)
			state, _, _ := bytes.Cut(tx.Bucket(bucketByOwner).Get(append(bytes.Clone(h.owner), indexSuffix(h.updated, id)...)), []byte{0})
			st.Tasks++
			st.ByState[a2a.TaskState(state)]++
			if ns := h.updated.UnixNano(); ns < oldest {
				oldest, st.Oldest, st.OldestUpdated = ns, id, h.updated
			}
			return nil
		})
		if err != nil {
			return err
		}
		if b := tx.Bucket(bucketMeta).Get(keyLastPurge); len(b) == 24 {
			st.LastPurge = time.Unix(0, int64(binary.BigEndian.Uint64(b)))
			st.LastPurgeCount = int(binary.BigEndian.Uint64(b[8:]))
			st.Purged = int64(binary.BigEndian.Uint64(b[16:]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store stats: %w", err)
	}
	files, err := filepath.Glob(s.db.Path() + "*") // the file, its log segments and their spare
	if err != nil {
		return nil, fmt.Errorf("store stats: %w", err)
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			st.Bytes += fi.Size()
		}
	}
	return st, nil
}
