package tasks_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
)

// TestRedisStore runs the shared store suite on Redis.
func TestRedisStore(t *testing.T) {
	url := redisURL(t)
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleRedis(t, url) })
}

// redisURL is the machine's Redis on 127.0.0.1:6379 when it answers,
// otherwise one started for tb.
func redisURL(tb testing.TB) string {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", 200*time.Millisecond); err == nil {
		c.Close()
		return "redis://127.0.0.1:6379/0"
	}
	return startRedis(tb, freePort(tb)).url
}

func freePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// redisServer is a redis-server process of one test, without persistence
// unless its arguments ask for it.
type redisServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedis(tb testing.TB, port int, args ...string) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("127.0.0.1:6379 does not answer and redis-server is not in PATH: install it (apt-get install redis-server); CI installs it")
	}
	args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, args...)
	cmd := exec.Command(bin, args...) // later arguments win
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	s := &redisServer{url: fmt.Sprintf("redis://127.0.0.1:%d/0", port), cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	tb.Cleanup(s.stop)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	waitFor(tb, 10*time.Second, "redis-server to answer", func() bool {
		select {
		case <-s.done:
			tb.Fatalf("redis-server on port %d exited", port)
		default:
		}
		return c.Ping(context.Background()).Err() == nil
	})
	return s
}

// stop kills the server and waits for it to exit; stopping twice is fine.
func (s *redisServer) stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// waitFor polls cond until it holds, failing tb after max.
func waitFor(tb testing.TB, max time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", max, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openRedis opens a store in a namespace of its own, whose keys are
// deleted when tb ends.
func openRedis(tb testing.TB, url string, opts ...tasks.RedisOption) (*tasks.RedisStore, string) {
	tb.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	ns := "test-" + hex.EncodeToString(b)
	s, err := tasks.OpenRedis(context.Background(), url, ns, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		deleteKeys(tb, redisClient(tb, url), "handoff:{"+ns+"}:*")
	})
	return s, "handoff:{" + ns + "}:"
}

// redisClient is a client of its own for a store URL: one server, or a
// Cluster when the URL lists seed nodes (addr parameters).
func redisClient(tb testing.TB, url string) redis.UniversalClient {
	var c redis.UniversalClient
	if strings.Contains(url, "addr=") {
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			tb.Fatal(err)
		}
		c = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(url)
		if err != nil {
			tb.Fatal(err)
		}
		c = redis.NewClient(o)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// deleteKeys deletes the keys matching pattern, on every master of a Cluster.
func deleteKeys(tb testing.TB, c redis.UniversalClient, pattern string) {
	ctx := context.Background()
	del := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 500).Iterator()
		for it.Next(ctx) {
			c.Del(ctx, it.Val())
		}
		return it.Err()
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	case *redis.Client:
		err = del(ctx, c)
	}
	if err != nil {
		tb.Errorf("delete keys %s: %v", pattern, err)
	}
}

// corruptibleRedis damages records with its own client, in the layout
// RedisStore documents.
type corruptibleRedis struct {
	*tasks.RedisStore
	rdb    redis.UniversalClient
	prefix string
}

func openCorruptibleRedis(t *testing.T, url string) *corruptibleRedis {
	s, prefix := openRedis(t, url)
	return &corruptibleRedis{RedisStore: s, rdb: redisClient(t, url), prefix: prefix}
}

func (c *corruptibleRedis) CorruptTask(t *testing.T, id a2a.TaskID) {
	if err := c.rdb.HSet(t.Context(), c.prefix+"task:"+string(id), "record", "{").Err(); err != nil {
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
	port := freePort(t)
	srv := startRedis(t, port)
	const timeout = 500 * time.Millisecond
	// The server is this test's alone and keeps nothing: no keys to delete.
	s, err := tasks.OpenRedis(t.Context(), srv.url, "outage", tasks.WithRedisTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	owner := tasks.Owner{Principal: "p"}
	if err := s.Append(ctx, newTask(owner, "before", a2a.TaskStateWorking, 1), []a2a.Event{newTask(owner, "before", a2a.TaskStateWorking, 1).Task}); err != nil {
		t.Fatal(err)
	}
	srv.stop()
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
		if !errors.Is(err, tasks.ErrUnavailable) {
			t.Errorf("%s while Redis is down: %v, want ErrUnavailable", name, err)
		} else {
			t.Logf("%s while Redis is down, after %v: %v", name, took.Round(time.Millisecond), err)
		}
		if took > 4*timeout {
			t.Errorf("%s took %v, want under %v", name, took, 4*timeout)
		}
	}

	startRedis(t, port) // empty: the test server keeps nothing on disk
	waitFor(t, 10*time.Second, "the store to recover", func() bool {
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
	_, err = tasks.OpenRedis(t.Context(), "redis://"+ln.Addr().String(), "silent", tasks.WithRedisTimeout(timeout))
	if !errors.Is(err, tasks.ErrUnavailable) {
		t.Errorf("open against a silent server: %v, want ErrUnavailable", err)
	}
	if took := time.Since(start); took > 4*timeout {
		t.Errorf("open took %v, want under %v", took, 4*timeout)
	}
}

// TestRedisCallerCancel reports the caller's own cancellation as such, not
// as an outage.
func TestRedisCallerCancel(t *testing.T) {
	s, _ := openRedis(t, redisURL(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Get(ctx, tasks.Owner{Principal: "p"}, "t")
	if !errors.Is(err, context.Canceled) || errors.Is(err, tasks.ErrUnavailable) {
		t.Errorf("get with a cancelled context: %v", err)
	}
}

// TestRedisAppendRetried repeats a write whose reply was lost: the second
// attempt finds its own snapshot stored and succeeds without a second event.
func TestRedisAppendRetried(t *testing.T) {
	s, _ := openRedis(t, redisURL(t))
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
			s, err := tasks.OpenRedis(t.Context(), c.url, c.ns)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
	_, err := tasks.OpenRedis(t.Context(), "redis://user:secret@127.0.0.1:1", "ns", tasks.WithRedisTimeout(200*time.Millisecond))
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("open with a password, nothing listening: %v", err)
	}
}

// BenchmarkStore appends one event and gets one task, on bbolt and on Redis
// (the machine's, as configured, and one of its own with appendfsync always),
// side by side: go test -run '^$' -bench Store ./tasks. Writers run in
// parallel, each on its own task, as the engine's tasks do.
func BenchmarkStore(b *testing.B) {
	url := redisURL(b)
	backends := []struct {
		name string
		open func(b *testing.B) tasks.Store
	}{
		{"bolt", func(b *testing.B) tasks.Store {
			s := openCorruptibleBolt(b)
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"redis", func(b *testing.B) tasks.Store { s, _ := openRedis(b, url); return s }},
		// Durable as bolt is: every write fsynced before Redis answers.
		{"redis-fsync", func(b *testing.B) tasks.Store {
			srv := startRedis(b, freePort(b), "--dir", b.TempDir(), "--appendonly", "yes", "--appendfsync", "always")
			s, _ := openRedis(b, srv.url)
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
