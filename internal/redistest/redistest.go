package redistest

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/redis/go-redis/v9"
)

// URL is the shared Redis, as a store URL.
const URL = "redis://127.0.0.1:6379/0"

// Client returns a client of the shared Redis, closed when tb ends.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	opt, err := redis.ParseURL(URL)
	if err != nil {
		tb.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// Namespace returns a fresh namespace, named prefix plus random text so a
// left-over key says which tests wrote it, whose keys (handoff:{NS}:*) are
// deleted when tb ends.
func Namespace(tb testing.TB, prefix string) string {
	tb.Helper()
	ns := prefix + rand.Text()
	tb.Cleanup(func() {
		opt, err := redis.ParseURL(URL)
		if err != nil {
			tb.Error(err)
			return
		}
		rdb := redis.NewClient(opt)
		defer rdb.Close()
		ctx := context.Background() // tb's context is done by the time cleanups run
		keys, err := rdb.Keys(ctx, "handoff:{"+ns+"}:*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			tb.Errorf("delete the keys of Redis namespace %s: %v", ns, err)
		}
	})
	return ns
}
