package tasks_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
)

func sealer(t testing.TB, secrets ...string) *tasks.Sealer {
	t.Helper()
	var bs [][]byte
	for _, s := range secrets {
		bs = append(bs, []byte(s))
	}
	s, err := tasks.NewSealer(bs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	secretA = "secret-A-0123456789abcdef0123456789abcdef"
	secretB = "secret-B-0123456789abcdef0123456789abcdef"
	token   = "TOKEN-in-clear-4f1d"
	cred    = "CREDENTIAL-in-clear-9c2e"
)

// TestSealedStores runs the shared store suite on both stores with sealing on.
func TestSealedStores(t *testing.T) {
	s := sealer(t, secretA)
	t.Run("bolt", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleBolt(t, tasks.WithSealer(s)) })
	})
	t.Run("redis", func(t *testing.T) {
		url := redisURL(t)
		storetest.Run(t, func(t *testing.T) tasks.Store {
			st, prefix := openRedis(t, url, tasks.WithSealer(s))
			return &corruptibleRedis{RedisStore: st, rdb: redisClient(t, url), prefix: prefix}
		})
	})
}

// sealedBackend is one store with a way to read what it keeps of a push
// config, raw, and to open it again with other options (another process or
// replica, after a key rotation).
type sealedBackend struct {
	name string
	// open returns a store over the same data at every call, with opts.
	place func(t *testing.T) (open func(t *testing.T, opts ...tasks.StoreOption) tasks.Store, raw func(t *testing.T, task a2a.TaskID, id string) []byte)
}

func sealedBackends() []sealedBackend {
	return []sealedBackend{
		{name: "bolt", place: func(t *testing.T) (func(*testing.T, ...tasks.StoreOption) tasks.Store, func(*testing.T, a2a.TaskID, string) []byte) {
			path := t.TempDir() + "/tasks.db"
			var cur *tasks.BoltStore
			open := func(t *testing.T, opts ...tasks.StoreOption) tasks.Store {
				if cur != nil {
					cur.Close() // bbolt locks the file: one store at a time
				}
				var bo []tasks.BoltOption
				for _, o := range opts {
					bo = append(bo, o)
				}
				s, err := tasks.OpenBolt(path, time.Second, bo...)
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
			return open, raw
		}},
		{name: "redis", place: func(t *testing.T) (func(*testing.T, ...tasks.StoreOption) tasks.Store, func(*testing.T, a2a.TaskID, string) []byte) {
			url := redisURL(t)
			var prefix string
			var first *tasks.RedisStore
			open := func(t *testing.T, opts ...tasks.StoreOption) tasks.Store {
				var ro []tasks.RedisOption
				for _, o := range opts {
					ro = append(ro, o)
				}
				if first == nil {
					first, prefix = openRedis(t, url, ro...)
					return first
				}
				ns := strings.TrimSuffix(strings.TrimPrefix(prefix, "handoff:{"), "}:")
				s, err := tasks.OpenRedis(t.Context(), url, ns, ro...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			raw := func(t *testing.T, task a2a.TaskID, id string) []byte {
				v, err := redisClient(t, url).HGet(t.Context(), prefix+"push:"+string(task), id).Bytes()
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			return open, raw
		}},
	}
}

func secretConfig(task, id string) *a2a.PushConfig {
	return &a2a.PushConfig{TaskID: a2a.TaskID(task), ID: id, URL: "https://hook/" + id, Token: token + id,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: cred + id}}
}

func newSealedTask(t *testing.T, s tasks.Store, id string) {
	t.Helper()
	snap := &tasks.Snapshot{Owner: tasks.Owner{Principal: "alice"}, Version: 1, Updated: time.Now().UTC(),
		Task: &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}}
	if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
		t.Fatal(err)
	}
}

var alice = tasks.Owner{Principal: "alice"}

// TestSealedAtRest: the value a store keeps holds neither the token nor the
// credentials, while every read gives them back; a rotation keeps old
// values open while the old secret is configured, and without it they fail
// with ErrUnsealable, as they do on a store with no sealer.
func TestSealedAtRest(t *testing.T) {
	for _, b := range sealedBackends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			open, raw := b.place(t)
			s := open(t, tasks.WithSealer(sealer(t, secretA)))
			newSealedTask(t, s, "t1")
			if err := s.PutPushConfig(ctx, alice, secretConfig("t1", "old")); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetPushConfig(ctx, alice, "t1", "old")
			if err != nil || got.Token != token+"old" || got.Auth.Credentials != cred+"old" {
				t.Fatalf("get: %+v, %v", got, err)
			}
			stored := raw(t, "t1", "old")
			for _, secret := range []string{token, cred} {
				if bytes.Contains(stored, []byte(secret)) {
					t.Fatalf("stored value holds %q: %s", secret, stored)
				}
			}
			if !bytes.Contains(stored, []byte("https://hook/old")) {
				t.Fatalf("stored value is not the config: %s", stored)
			}

			// Rotation: B seals, A still opens.
			s = open(t, tasks.WithSealer(sealer(t, secretB, secretA)))
			if err := s.PutPushConfig(ctx, alice, secretConfig("t1", "new")); err != nil {
				t.Fatal(err)
			}
			all, err := s.ListPushConfigs(ctx, alice, "t1")
			if err != nil || len(all) != 2 || all[0].Token != token+"new" || all[1].Auth.Credentials != cred+"old" {
				t.Fatalf("list after rotation: %+v, %v", all, err)
			}
			ds, err := s.PushDeliveries(ctx, "t1")
			if err != nil || len(ds) != 2 || ds[1].Config.Token != token+"old" {
				t.Fatalf("deliveries after rotation: %+v, %v", ds, err)
			}

			// A retired: its value no longer opens, the new one does.
			s = open(t, tasks.WithSealer(sealer(t, secretB)))
			if _, err := s.GetPushConfig(ctx, alice, "t1", "old"); !errors.Is(err, tasks.ErrUnsealable) {
				t.Fatalf("get under a retired key: %v, want ErrUnsealable", err)
			}
			if _, err := s.PushDeliveries(ctx, "t1"); !errors.Is(err, tasks.ErrUnsealable) {
				t.Fatalf("deliveries under a retired key: %v, want ErrUnsealable", err)
			}
			if got, err := s.GetPushConfig(ctx, alice, "t1", "new"); err != nil || got.Token != token+"new" {
				t.Fatalf("get under the current key: %+v, %v", got, err)
			}

			// No sealer: sealed values are refused, never handed over as they are.
			s = open(t)
			if _, err := s.ListPushConfigs(ctx, alice, "t1"); !errors.Is(err, tasks.ErrUnsealable) {
				t.Fatalf("list without a sealer: %v, want ErrUnsealable", err)
			}
		})
	}
}

// TestSealerRefuses: short or missing secrets are refused.
func TestSealerRefuses(t *testing.T) {
	if _, err := tasks.NewSealer(); err == nil {
		t.Error("a sealer without a secret")
	}
	if _, err := tasks.NewSealer([]byte(secretA), []byte("short")); err == nil || !strings.Contains(err.Error(), "secret 1") {
		t.Errorf("a short secret: %v", err)
	}
}

// TestSealedValueBound: a sealed value copied into another config (another
// task, or another field) does not open.
func TestSealedValueBound(t *testing.T) {
	ctx := t.Context()
	url := redisURL(t)
	s, prefix := openRedis(t, url, tasks.WithSealer(sealer(t, secretA)))
	newSealedTask(t, s, "t1")
	newSealedTask(t, s, "t2")
	for _, task := range []string{"t1", "t2"} {
		if err := s.PutPushConfig(ctx, alice, secretConfig(task, "a")); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redisClient(t, url)
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
