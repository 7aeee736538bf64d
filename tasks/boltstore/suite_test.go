package boltstore_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// TestBoltStore runs the shared store suite on the embedded store.
func TestBoltStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleBolt(t) })
}

// TestBoltStoreSealed runs the shared store suite on the embedded store with
// sealing on, and the sealed suite on what it keeps in its file.
func TestBoltStoreSealed(t *testing.T) {
	s := storetest.Sealer(t, storetest.SecretA)
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleBolt(t, boltstore.WithSealer(s)) })
	storetest.RunSealed(t, func(t *testing.T) storetest.Sealed {
		path := filepath.Join(t.TempDir(), "tasks.db")
		var cur *boltstore.Store
		open := func(t *testing.T, sealer *tasks.Sealer) tasks.Store {
			if cur != nil {
				cur.Close() // bbolt locks the file: one store at a time
			}
			s, err := boltstore.Open(path, time.Second, boltstore.WithSealer(sealer))
			if err != nil {
				t.Fatal(err)
			}
			cur = s
			t.Cleanup(func() { s.Close() })
			return s
		}
		raw := func(t *testing.T, task a2a.TaskID, id string) []byte {
			cur.Close()
			db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var v []byte
			db.View(func(tx *bolt.Tx) error {
				v = bytes.Clone(tx.Bucket([]byte("push")).Get(append(append([]byte(task), 0), id...)))
				return nil
			})
			return v
		}
		return storetest.Sealed{Open: open, Raw: raw}
	})
}

// corruptibleBolt lets the suite damage records. bbolt locks its file, so
// each damage closes the store, edits the file and opens it again.
type corruptibleBolt struct {
	*boltstore.Store
	path string
	opts []boltstore.Option
}

func openCorruptibleBolt(tb testing.TB, opts ...boltstore.Option) *corruptibleBolt {
	path := filepath.Join(tb.TempDir(), "tasks.db")
	s, err := boltstore.Open(path, time.Second, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return &corruptibleBolt{Store: s, path: path, opts: opts}
}

// put writes value at key of bucket, in the embedded store's layout.
func (c *corruptibleBolt) put(t *testing.T, bucket string, key []byte) {
	t.Helper()
	if err := c.Store.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(c.path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put(key, []byte("{")) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.Store, err = boltstore.Open(c.path, time.Second, c.opts...); err != nil {
		t.Fatal(err)
	}
}

func (c *corruptibleBolt) CorruptTask(t *testing.T, id a2a.TaskID) { c.put(t, "tasks", []byte(id)) }

// CorruptEvent damages the value that holds the events of the write that
// started at seq (one write, one value): every caller's seq starts a write.
func (c *corruptibleBolt) CorruptEvent(t *testing.T, id a2a.TaskID, seq uint64) {
	c.put(t, "events", binary.BigEndian.AppendUint64(append([]byte(id), 0), seq))
}

func (c *corruptibleBolt) CorruptPushConfig(t *testing.T, task a2a.TaskID, id string) {
	c.put(t, "push", append(append([]byte(task), 0), id...))
}
