package boltstore_test

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// TestBoltStoreRetention runs the retention suite on the embedded store.
func TestBoltStoreRetention(t *testing.T) {
	storetest.RunRetention(t, func(t *testing.T) tasks.Store {
		return openCorruptibleBolt(t, boltstore.WithBlobIndex(storetest.Blobs)).Store
	})
}

// TestFinishedIndexBuiltOnOpen: a store made before retention (no finished
// index) gets one from its tasks when opened, so its old tasks expire too.
func TestFinishedIndexBuiltOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	now := time.Now()
	fillPurgeStore(t, path, now)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte("finished")) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exp, err := s.Expired(t.Context(), purgeKeep, now, oldTasks+keptTasks)
	if err != nil || len(exp) != oldTasks {
		t.Fatalf("expired after the index was rebuilt: %d, %v; want the %d old tasks", len(exp), err, oldTasks)
	}
}
