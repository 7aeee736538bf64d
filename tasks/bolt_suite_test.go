package tasks_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
)

// TestBoltStore runs the shared store suite on the embedded store.
func TestBoltStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleBolt(t) })
}

// corruptibleBolt lets the suite damage records. bbolt locks its file, so
// each damage closes the store, edits the file and opens it again.
type corruptibleBolt struct {
	*tasks.BoltStore
	path string
	opts []tasks.BoltOption
}

func openCorruptibleBolt(tb testing.TB, opts ...tasks.BoltOption) *corruptibleBolt {
	path := filepath.Join(tb.TempDir(), "tasks.db")
	s, err := tasks.OpenBolt(path, time.Second, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return &corruptibleBolt{BoltStore: s, path: path, opts: opts}
}

// put writes value at key of bucket, in the embedded store's layout.
func (c *corruptibleBolt) put(t *testing.T, bucket string, key []byte) {
	t.Helper()
	if err := c.BoltStore.Close(); err != nil {
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
	if c.BoltStore, err = tasks.OpenBolt(c.path, time.Second, c.opts...); err != nil {
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
