package boltstore_test

import (
	"testing"

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
