package redisstore_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
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

// TestRedisRetentionExpiry: with WithRetention a finished task's keys get
// its window plus ExpiryGrace as TTL, an unfinished one's none; a task whose
// keys Redis expired before a purge leaves the list (its index entry
// dropped), and the next purge cleans the finished index.
func TestRedisRetentionExpiry(t *testing.T) {
	ctx := t.Context()
	url := redistest.ServerURL(t)
	keep := tasks.Retention{Finished: time.Hour, Tenants: map[string]time.Duration{"forever": 0}}
	s, prefix := redistest.OpenStore(t, url, redisstore.WithRetention(keep))
	rdb := redistest.ClientFor(t, url)
	alice := tasks.Owner{Principal: "alice"}
	put := func(owner tasks.Owner, id string, state a2a.TaskState, at time.Time) {
		snap := newTask(owner, id, state, 1)
		snap.Updated = at
		if err := s.Append(ctx, snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	put(alice, "done", a2a.TaskStateCompleted, now)
	put(alice, "running", a2a.TaskStateWorking, now)
	put(tasks.Owner{Principal: "bob", Tenant: "forever"}, "kept", a2a.TaskStateCompleted, now)
	want := time.Hour + redisstore.ExpiryGrace
	for _, k := range []string{"task:done", "events:done"} {
		if ttl := rdb.PTTL(ctx, prefix+k).Val(); ttl <= want-time.Minute || ttl > want {
			t.Errorf("TTL of %s = %v, want about %v", k, ttl, want)
		}
	}
	for _, k := range []string{"task:running", "events:running", "task:kept", "events:kept"} {
		if ttl := rdb.PTTL(ctx, prefix+k).Val(); ttl != -1 {
			t.Errorf("TTL of %s = %v, want none", k, ttl)
		}
	}
	// Redis expires the finished task before any purge.
	if err := rdb.Del(ctx, prefix+"task:done", prefix+"events:done").Err(); err != nil {
		t.Fatal(err)
	}
	page, err := s.List(ctx, tasks.ListQuery{Owner: alice})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Task.ID != "running" || page.TotalSize != 1 {
		t.Fatalf("list after expiry: %+v, %v; want running alone", page, err)
	}
	if n := rdb.ZCard(ctx, prefix+"owner:"+base64.RawURLEncoding.EncodeToString(record.OwnerKey(alice))).Val(); n != 1 {
		t.Errorf("owner index holds %d members after the list, want 1", n)
	}
	exp, err := s.Expired(ctx, keep, now.Add(2*time.Hour), 10)
	if err != nil || len(exp) != 1 || exp[0].ID != "done" {
		t.Fatalf("expired = %+v, %v; want the expired task by id", exp, err)
	}
	res, err := s.Purge(ctx, keep, now.Add(2*time.Hour), []a2a.TaskID{"done"})
	if err != nil || len(res.Tasks) != 1 {
		t.Fatalf("purge = %+v, %v", res, err)
	}
	if n := rdb.ZCard(ctx, prefix+"finished").Val(); n != 1 {
		t.Errorf("finished index holds %d after the purge, want 1 (kept)", n)
	}
}

// TestRedisPurgeTakesPushRetries: an operator's retry request on a finished
// task's push config expires with the task's other keys, and a purge deletes
// it with them: no key of the task is left.
func TestRedisPurgeTakesPushRetries(t *testing.T) {
	ctx := t.Context()
	url := redistest.ServerURL(t)
	keep := tasks.Retention{Finished: time.Hour}
	s, prefix := redistest.OpenStore(t, url, redisstore.WithRetention(keep))
	rdb := redistest.ClientFor(t, url)
	alice := tasks.Owner{Principal: "alice"}
	snap := newTask(alice, "done", a2a.TaskStateCompleted, 1)
	if err := s.Append(ctx, snap, []a2a.Event{snap.Task}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPushConfig(ctx, alice, &a2a.PushConfig{TaskID: "done", ID: "a", URL: "https://hook/a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddPushRetry(ctx, "done", "a", tasks.PushRetry{ID: "r1", Seq: 1, By: "ops", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	want := time.Hour + redisstore.ExpiryGrace
	if ttl := rdb.PTTL(ctx, prefix+"pushretry:done").Val(); ttl <= want-time.Minute || ttl > want {
		t.Errorf("TTL of pushretry:done = %v, want about %v (the task's)", ttl, want)
	}
	if ttl := rdb.PTTL(ctx, prefix+"push:done").Val(); ttl <= want-time.Minute || ttl > want {
		t.Errorf("TTL of push:done (a config put after the task finished) = %v, want about %v", ttl, want)
	}
	res, err := s.Purge(ctx, keep, time.Now().Add(2*time.Hour), []a2a.TaskID{"done"})
	if err != nil || len(res.Tasks) != 1 {
		t.Fatalf("purge = %+v, %v", res, err)
	}
	for _, k := range []string{"task:done", "events:done", "push:done", "pushretry:done"} {
		if n := rdb.Exists(ctx, prefix+k).Val(); n != 0 {
			t.Errorf("%s is left after the purge", k)
		}
	}
}
