package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/tasks"
)

// The list indexes beside bucketByOwner, so that a page of an owner's
// tasks in one state or of one context costs its page, and its total a
// count, not a walk of every task of the owner:
var (
	bucketByState   = []byte("by_state")   // owner key, state, 0, inverted updated, task id → nothing
	bucketByContext = []byte("by_context") // owner key, uvarint length, context id, inverted updated, task id → state
	bucketCounts    = []byte("counts")     // owner key, countOwner | countState state | countContext context id → uint64
)

// The kinds of bucketCounts keys after the owner key.
const (
	countOwner   = 'o'
	countState   = 's'
	countContext = 'c'
)

func statePrefix(owner, state []byte) []byte {
	return append(append(append(make([]byte, 0, len(owner)+len(state)+1+40), owner...), state...), 0)
}

func contextPrefix(owner, ctxID []byte) []byte {
	b := append(make([]byte, 0, len(owner)+len(ctxID)+4+40), owner...)
	b = binary.AppendUvarint(b, uint64(len(ctxID)))
	return append(b, ctxID...)
}

func countKey(owner []byte, kind byte, v []byte) []byte {
	return append(append(append(make([]byte, 0, len(owner)+1+len(v)), owner...), kind), v...)
}

// readCount returns the count at key.
func readCount(b *bolt.Bucket, key []byte) (int, error) {
	v := b.Get(key)
	switch {
	case v == nil:
		return 0, nil
	case len(v) != 8:
		return 0, fmt.Errorf("%w: a list count of %d bytes", tasks.ErrCorrupt, len(v))
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

func addCount(b *bolt.Bucket, key []byte, d int) error {
	n, err := readCount(b, key)
	if err != nil {
		return err
	}
	if n += d; n <= 0 {
		return b.Delete(key)
	}
	return b.Put(key, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// indexListed adds (add) or removes the entries and counts of the list
// indexes of a task of owner whose by_owner entry has suffix (inverted
// updated, task id) and value (state, 0, context id). It does nothing in a
// store that has not built the indexes yet (recovered before it had them:
// Open builds them).
func indexListed(tx *bolt.Tx, owner, suffix, value []byte, add bool) error {
	return indexEntries(tx, owner, suffix, value, add, nil)
}

// indexMoved moves a task's list index entries from (oldSuffix, oldValue)
// to (suffix, value), as an append that changes its status does: only the
// counts that differ are written (its state's, rarely its context's), where
// a removal and an addition would read and write all six, which made the
// list indexes most of the commit's work on blocking sends.
func indexMoved(tx *bolt.Tx, owner, oldSuffix, oldValue, suffix, value []byte) error {
	if err := indexEntries(tx, owner, oldSuffix, oldValue, false, value); err != nil {
		return err
	}
	return indexEntries(tx, owner, suffix, value, true, oldValue)
}

// indexEntries adds (add) or removes the list index entries of a task and
// its counts; a count it shares with other (the value the task has after a
// removal, or had before an addition) is left as it is.
func indexEntries(tx *bolt.Tx, owner, suffix, value []byte, add bool, other []byte) error {
	byState, byContext, counts := tx.Bucket(bucketByState), tx.Bucket(bucketByContext), tx.Bucket(bucketCounts)
	if byState == nil || byContext == nil || counts == nil {
		return nil
	}
	byState.FillPercent, byContext.FillPercent = 0.9, 0.9
	state, ctxID, _ := bytes.Cut(value, []byte{0})
	sk := append(statePrefix(owner, state), suffix...)
	ck := append(contextPrefix(owner, ctxID), suffix...)
	d := 1
	if add {
		if err := byState.Put(sk, nil); err != nil {
			return err
		}
		if err := byContext.Put(ck, state); err != nil {
			return err
		}
	} else {
		d = -1
		if err := byState.Delete(sk); err != nil {
			return err
		}
		if err := byContext.Delete(ck); err != nil {
			return err
		}
	}
	keys := [][]byte{countKey(owner, countState, state), countKey(owner, countContext, ctxID), countKey(owner, countOwner, nil)}
	if other != nil {
		otherState, otherCtx, _ := bytes.Cut(other, []byte{0})
		switch {
		case bytes.Equal(state, otherState) && bytes.Equal(ctxID, otherCtx):
			keys = nil
		case bytes.Equal(state, otherState):
			keys = keys[1:2]
		case bytes.Equal(ctxID, otherCtx):
			keys = keys[:1]
		default:
			keys = keys[:2]
		}
	}
	for _, k := range keys {
		if err := addCount(counts, k, d); err != nil {
			return err
		}
	}
	return nil
}

// indexLists builds the list indexes of a store made before it had them,
// from bucketByOwner.
func indexLists(tx *bolt.Tx) error {
	type entry struct{ owner, suffix, value []byte }
	var all []entry
	err := tx.Bucket(bucketByOwner).ForEach(func(k, v []byte) error {
		owner, ok := ownerKeyLen(k)
		if !ok || len(k)-owner < 9 {
			return fmt.Errorf("%w: a list index key", tasks.ErrCorrupt)
		}
		all = append(all, entry{k[:owner], k[owner:], v})
		return nil
	})
	if err != nil {
		return err
	}
	for _, e := range all {
		if err := indexListed(tx, e.owner, e.suffix, e.value, true); err != nil {
			return err
		}
	}
	return nil
}

// ownerKeyLen returns the length of the owner key (record.OwnerKey) k
// starts with.
func ownerKeyLen(k []byte) (int, bool) {
	at := 0
	for range 2 {
		n, w := binary.Uvarint(k[at:])
		if w <= 0 || n > uint64(len(k)-at-w) {
			return 0, false
		}
		at += w + int(n)
	}
	return at, true
}
