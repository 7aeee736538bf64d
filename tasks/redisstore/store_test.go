package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// TestRedisStore runs the shared store suite on Redis.
func TestRedisStore(t *testing.T) {
	url := redistest.ServerURL(t)
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleRedis(t, url) })
}

// TestRedisStoreSealed runs the shared store suite on Redis with sealing on,
// and the sealed suite on what it keeps in its hashes.
func TestRedisStoreSealed(t *testing.T) {
	url := redistest.ServerURL(t)
	s := storetest.Sealer(t, storetest.SecretA)
	storetest.Run(t, func(t *testing.T) tasks.Store {
		st, prefix := redistest.OpenStore(t, url, redisstore.WithSealer(s))
		return &corruptibleRedis{Store: st, rdb: redistest.ClientFor(t, url), prefix: prefix}
	})
	storetest.RunSealed(t, func(t *testing.T) storetest.Sealed {
		var prefix string
		var first *redisstore.Store
		open := func(t *testing.T, sealer *tasks.Sealer) tasks.Store {
			if first == nil {
				first, prefix = redistest.OpenStore(t, url, redisstore.WithSealer(sealer))
				return first
			}
			ns := strings.TrimSuffix(strings.TrimPrefix(prefix, "handoff:{"), "}:")
			s, err := redisstore.Open(t.Context(), url, ns, redisstore.WithSealer(sealer))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		raw := func(t *testing.T, task a2a.TaskID, id string) []byte {
			v, err := redistest.ClientFor(t, url).HGet(t.Context(), prefix+"push:"+string(task), id).Bytes()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		return storetest.Sealed{Open: open, Raw: raw}
	})
}

// TestSealedValueBound: a sealed value copied into another config (another
// task, or another field) does not open.
func TestSealedValueBound(t *testing.T) {
	alice := tasks.Owner{Principal: "alice"}
	ctx := t.Context()
	url := redistest.ServerURL(t)
	s, prefix := redistest.OpenStore(t, url, redisstore.WithSealer(storetest.Sealer(t, storetest.SecretA)))
	for _, id := range []string{"t1", "t2"} {
		snap := newTask(alice, id, a2a.TaskStateWorking, 1)
		if err := s.Append(ctx, snap, []a2a.Event{snap.Task}); err != nil {
			t.Fatal(err)
		}
	}
	for _, task := range []string{"t1", "t2"} {
		if err := s.PutPushConfig(ctx, alice, &a2a.PushConfig{TaskID: a2a.TaskID(task), ID: "a", URL: "https://hook/a", Token: "TOKEN-in-clear-" + task}); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redistest.ClientFor(t, url)
	v1, err := rdb.HGet(ctx, prefix+"push:t1", "a").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, prefix+"push:t2", "a", strings.ReplaceAll(v1, `"taskId":"t1"`, `"taskId":"t2"`)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPushConfig(ctx, alice, "t2", "a"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("a value moved to another task: %v, want ErrUnsealable", err)
	}
}

// corruptibleRedis damages records with its own client, in the layout
// the Redis store documents.
type corruptibleRedis struct {
	*redisstore.Store
	rdb    redis.UniversalClient
	prefix string
}

func openCorruptibleRedis(t *testing.T, url string) *corruptibleRedis {
	s, prefix := redistest.OpenStore(t, url)
	return &corruptibleRedis{Store: s, rdb: redistest.ClientFor(t, url), prefix: prefix}
}

func (c *corruptibleRedis) CorruptTask(t *testing.T, id a2a.TaskID) {
	if err := c.rdb.HSet(t.Context(), c.prefix+"task:"+string(id), "head", "{").Err(); err != nil {
		t.Fatal(err)
	}
}

// CorruptEvent rewrites the stream: an entry cannot be replaced in place.
func (c *corruptibleRedis) CorruptEvent(t *testing.T, id a2a.TaskID, seq uint64) {
	ctx, key := t.Context(), c.prefix+"events:"+string(id)
	entries, err := c.rdb.XRange(ctx, key, "-", "+").Result()
	if err == nil {
		err = c.rdb.Del(ctx, key).Err()
	}
	for _, e := range entries {
		if err != nil {
			break
		}
		if e.ID == "0-"+strconv.FormatUint(seq, 10) {
			e.Values = map[string]any{"e": "{"}
		}
		err = c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: e.ID, Values: e.Values}).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (c *corruptibleRedis) CorruptPushConfig(t *testing.T, task a2a.TaskID, id string) {
	if err := c.rdb.HSet(t.Context(), c.prefix+"push:"+string(task), id, "{").Err(); err != nil {
		t.Fatal(err)
	}
}

func newTask(owner tasks.Owner, id string, state a2a.TaskState, version uint64) *tasks.Snapshot {
	return &tasks.Snapshot{
		Task:  &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state}},
		Owner: owner, Version: version, Updated: time.Now(),
	}
}

// TestRedisOutage stops the server under an open store: calls fail fast
// with ErrUnavailable, and work again once the server is back, without
// reopening the store.
func TestRedisOutage(t *testing.T) {
	port := redistest.FreePort(t)
	srv := redistest.Start(t, port)
	const timeout = 500 * time.Millisecond
	// The server is this test's alone and keeps nothing: no keys to delete.
	s, err := redisstore.Open(t.Context(), srv.URL, "outage", redisstore.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	owner := tasks.Owner{Principal: "p"}
	if err := s.Append(ctx, newTask(owner, "before", a2a.TaskStateWorking, 1), []a2a.Event{newTask(owner, "before", a2a.TaskStateWorking, 1).Task}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	calls := map[string]func() error{
		"Append": func() error {
			snap := newTask(owner, "during", a2a.TaskStateWorking, 1)
			return s.Append(ctx, snap, []a2a.Event{snap.Task})
		},
		"Get":        func() error { _, err := s.Get(ctx, owner, "before"); return err },
		"List":       func() error { _, err := s.List(ctx, tasks.ListQuery{Owner: owner}); return err },
		"Unfinished": func() error { _, err := s.Unfinished(ctx); return err },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		took := time.Since(start)
		if !errors.Is(err, redisstore.ErrUnavailable) {
			t.Errorf("%s while Redis is down: %v, want ErrUnavailable", name, err)
		} else {
			t.Logf("%s while Redis is down, after %v: %v", name, took.Round(time.Millisecond), err)
		}
		if took > 4*timeout {
			t.Errorf("%s took %v, want under %v", name, took, 4*timeout)
		}
	}

	redistest.Start(t, port) // empty: the test server keeps nothing on disk
	redistest.WaitFor(t, 10*time.Second, "the store to recover", func() bool {
		snap := newTask(owner, "after", a2a.TaskStateWorking, 1)
		return s.Append(ctx, snap, []a2a.Event{snap.Task}) == nil
	})
	if _, err := s.Get(ctx, owner, "after"); err != nil {
		t.Errorf("get after recovery: %v", err)
	}
}

// TestRedisUnresponsive points the store at a server that accepts
// connections and never answers: opening it fails within the timeout
// instead of hanging.
func TestRedisUnresponsive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	const timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = redisstore.Open(t.Context(), "redis://"+ln.Addr().String(), "silent", redisstore.WithTimeout(timeout))
	if !errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("open against a silent server: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 4*timeout {
		t.Errorf("open took %v, want under %v", took, 4*timeout)
	}
}

// TestRedisCallerCancel reports the caller's own cancellation as such, not
// as an outage.
func TestRedisCallerCancel(t *testing.T) {
	s, _ := redistest.OpenStore(t, redistest.ServerURL(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Get(ctx, tasks.Owner{Principal: "p"}, "t")
	if !errors.Is(err, context.Canceled) || errors.Is(err, redisstore.ErrUnavailable) {
		t.Errorf("get with a cancelled context: %v", err)
	}
}

// TestRedisAppendRetried repeats a write whose reply was lost: the second
// attempt finds its own snapshot stored and succeeds without a second event.
func TestRedisAppendRetried(t *testing.T) {
	s, _ := redistest.OpenStore(t, redistest.ServerURL(t))
	ctx, owner := t.Context(), tasks.Owner{Principal: "p"}
	first := newTask(owner, "t", a2a.TaskStateSubmitted, 1)
	next := newTask(owner, "t", a2a.TaskStateWorking, 2)
	for _, w := range []*tasks.Snapshot{first, next, next} {
		if err := s.Append(ctx, w, []a2a.Event{a2a.NewStatusUpdateEvent(w.Task, w.Task.Status.State, nil)}); err != nil {
			t.Fatalf("append v%d: %v", w.Version, err)
		}
	}
	if evs, err := s.Events(ctx, owner, "t", 0); err != nil || len(evs) != 2 {
		t.Errorf("events: %d, %v; want 2", len(evs), err)
	}
	other := newTask(owner, "t", a2a.TaskStateCompleted, 2)
	err := s.Append(ctx, other, []a2a.Event{a2a.NewStatusUpdateEvent(other.Task, other.Task.Status.State, nil)})
	if !errors.Is(err, tasks.ErrConflict) {
		t.Errorf("a different write at the stored version: %v, want ErrConflict", err)
	}
}

func TestOpenRedisRefuses(t *testing.T) {
	for name, c := range map[string]struct{ url, ns string }{
		"empty namespace":      {"redis://127.0.0.1:6379", ""},
		"braces in namespace":  {"redis://127.0.0.1:6379", "a{b}"},
		"not a redis url":      {"http://127.0.0.1:6379", "ns"},
		"unknown url argument": {"redis://127.0.0.1:6379?bogus=1", "ns"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := redisstore.Open(t.Context(), c.url, c.ns)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
	_, err := redisstore.Open(t.Context(), "redis://user:secret@127.0.0.1:1", "ns", redisstore.WithTimeout(200*time.Millisecond))
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("open with a password, nothing listening: %v", err)
	}
}

// BenchmarkStore appends one event and gets one task, on bbolt and on Redis
// (the machine's, as configured, and one of its own with appendfsync always),
// side by side: go test -run '^$' -bench Store ./tasks/redisstore. Writers run in
// parallel, each on its own task, as the engine's tasks do.
func BenchmarkStore(b *testing.B) {
	url := redistest.ServerURL(b)
	backends := []struct {
		name string
		open func(b *testing.B) tasks.Store
	}{
		{"bolt", func(b *testing.B) tasks.Store {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "tasks.db"), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"redis", func(b *testing.B) tasks.Store { s, _ := redistest.OpenStore(b, url); return s }},
		// Durable as bolt is: every write fsynced before Redis answers.
		{"redis-fsync", func(b *testing.B) tasks.Store {
			srv := redistest.Start(b, redistest.FreePort(b), "--dir", b.TempDir(), "--appendonly", "yes", "--appendfsync", "always")
			s, _ := redistest.OpenStore(b, srv.URL)
			return s
		}},
	}
	owner := tasks.Owner{Principal: "bench"}
	for _, be := range backends {
		b.Run("Append/"+be.name, func(b *testing.B) {
			s := be.open(b)
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				snap := newTask(owner, fmt.Sprintf("w%d", n.Add(1)), a2a.TaskStateWorking, 0)
				for pb.Next() {
					next := *snap
					next.Version++
					if err := s.Append(context.Background(), &next, []a2a.Event{a2a.NewStatusUpdateEvent(next.Task, a2a.TaskStateWorking, nil)}); err != nil {
						b.Error(err)
						return
					}
					snap = &next
				}
			})
		})
	}
	for _, be := range backends {
		b.Run("Get/"+be.name, func(b *testing.B) {
			s := be.open(b)
			snap := newTask(owner, "t", a2a.TaskStateWorking, 1)
			snap.Task.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", 1024)))}
			if err := s.Append(context.Background(), snap, []a2a.Event{snap.Task}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Get(context.Background(), owner, "t"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestRedisFull fills a server that has a memory limit and no eviction:
// an append it refuses is [tasks.ErrStoreFull] and leaves the task as it
// was, so the engine can write it again; once there is room it is taken.
func TestRedisFull(t *testing.T) {
	port := redistest.FreePort(t)
	srv := redistest.Start(t, port, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	s, err := redisstore.Open(t.Context(), srv.URL, "full")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	owner := tasks.Owner{Principal: "p"}
	first := newTask(owner, "kept", a2a.TaskStateWorking, 1)
	if err := s.Append(ctx, first, []a2a.Event{first.Task}); err != nil {
		t.Fatal(err)
	}
	// Large fillers until one is refused, then small ones until even they
	// are: used memory is then at the limit.
	for _, size := range []int{256 << 10, 1 << 10} {
		fill := strings.Repeat("x", size)
		var full error
		for i := 0; i < 8<<20/size && full == nil; i++ {
			snap := newTask(owner, fmt.Sprintf("filler-%d-%d", size, i), a2a.TaskStateWorking, 1)
			snap.Task.Metadata = map[string]any{"fill": fill}
			full = s.Append(ctx, snap, []a2a.Event{snap.Task})
		}
		if !errors.Is(full, tasks.ErrStoreFull) {
			t.Fatalf("appends of %d bytes to a 4 MiB server: last err = %v, want ErrStoreFull", size, full)
		}
	}
	// Freed client buffers can bring used memory back under the limit by a
	// few bytes (seen under -race on a loaded machine): a limit well below
	// what the fillers hold keeps the server full for what follows.
	c := redistest.ClientFor(t, srv.URL)
	if err := c.ConfigSet(ctx, "maxmemory", "1mb").Err(); err != nil {
		t.Fatal(err)
	}
	next := newTask(owner, "kept", a2a.TaskStateCompleted, 2)
	done := a2a.NewStatusUpdateEvent(next.Task, a2a.TaskStateCompleted, nil)
	if err := s.Append(ctx, next, []a2a.Event{done}); !errors.Is(err, tasks.ErrStoreFull) {
		t.Fatalf("append to a stored task on the full server: err = %v, want ErrStoreFull", err)
	}
	if got, err := s.Get(ctx, owner, "kept"); err != nil || got.Version != 1 || got.Task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("task after a refused append: %+v, %v; want version 1, working", got, err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, next, []a2a.Event{done}); err != nil {
		t.Fatalf("the same append once there is room: %v", err)
	}
	if got, err := s.Get(ctx, owner, "kept"); err != nil || got.Version != 2 || got.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("task after the append was taken: %+v, %v; want version 2, completed", got, err)
	}
}
