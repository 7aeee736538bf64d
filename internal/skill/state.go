package skill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// State keeps what an executor must remember of a task across a restart
// and must never show the task's callers: a model skill's conversation
// (its system prompt, the tools' raw arguments and outcomes). It lives
// beside the ledger and the audit log, not in the task, whose every part
// GetTask shows.
type State interface {
	// Load returns the value of key, or nil when there is none.
	Load(ctx context.Context, key string) ([]byte, error)
	// Save stores value under key, durably before it returns.
	Save(ctx context.Context, key string, value []byte) error
	// Delete forgets key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// BoltState is a [State] in a bbolt file of the data directory. Each Save
// is one fsynced transaction, so a kill -9 after Save returns keeps it.
type BoltState struct{ db *bolt.DB }

var stateBucket = []byte("executor_state")

var (
	_ State = (*BoltState)(nil)
	_ State = (*RedisState)(nil)
)

// OpenBoltState opens (creating) the state file at path.
func OpenBoltState(path string) (*BoltState, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open executor state %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(stateBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("open executor state %s: %w", path, err)
	}
	return &BoltState{db: db}, nil
}

// Load implements [State].
func (s *BoltState) Load(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(stateBucket).Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load executor state %s: %w", key, err)
	}
	return out, nil
}

// Save implements [State].
func (s *BoltState) Save(_ context.Context, key string, value []byte) error {
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(stateBucket).Put([]byte(key), value) }); err != nil {
		return fmt.Errorf("save executor state %s: %w", key, err)
	}
	return nil
}

// Delete implements [State].
func (s *BoltState) Delete(_ context.Context, key string) error {
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(stateBucket).Delete([]byte(key)) }); err != nil {
		return fmt.Errorf("delete executor state %s: %w", key, err)
	}
	return nil
}

// Close closes the file.
func (s *BoltState) Close() error { return s.db.Close() }

// RedisState is a [State] in Redis, shared by the replicas: a replica that
// takes up another's task finds its conversation. Keys start with
// "handoff:{namespace}:state:".
type RedisState struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedisState returns the state of namespace on rdb, which the caller
// keeps and closes.
func NewRedisState(rdb redis.UniversalClient, namespace string) (*RedisState, error) {
	if namespace == "" || strings.ContainsAny(namespace, "{}") {
		return nil, fmt.Errorf("redis executor state: namespace %q: must be non-empty, without braces", namespace)
	}
	return &RedisState{rdb: rdb, prefix: "handoff:{" + namespace + "}:state:"}, nil
}

// Load implements [State].
func (s *RedisState) Load(ctx context.Context, key string) ([]byte, error) {
	v, err := s.rdb.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load executor state %s: %w", key, err)
	}
	return v, nil
}

// Save implements [State].
func (s *RedisState) Save(ctx context.Context, key string, value []byte) error {
	if err := s.rdb.Set(ctx, s.prefix+key, value, 0).Err(); err != nil {
		return fmt.Errorf("save executor state %s: %w", key, err)
	}
	return nil
}

// Delete implements [State].
func (s *RedisState) Delete(ctx context.Context, key string) error {
	if err := s.rdb.Del(ctx, s.prefix+key).Err(); err != nil {
		return fmt.Errorf("delete executor state %s: %w", key, err)
	}
	return nil
}

// Close does nothing: the caller closes rdb.
func (s *RedisState) Close() error { return nil }
