package redisstore_test

import (
	"testing"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// TestRedisStoreRetention runs the retention suite on Redis.
func TestRedisStoreRetention(t *testing.T) {
	url := redistest.ServerURL(t)
	storetest.RunRetention(t, func(t *testing.T) tasks.Store {
		s, _ := redistest.OpenStore(t, url, redisstore.WithBlobIndex(storetest.Blobs))
		return s
	})
}
