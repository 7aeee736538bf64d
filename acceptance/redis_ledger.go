package acceptance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// A RedisLedger is a [Ledger] in Redis, shared by every replica of one agent: a commit on
// one replica is the commit every replica sees, so "one delegation, at most one entry" holds
// across them.
//
// Its keys start with "handoff:{namespace}:ledger:" (the braces are a Cluster hash tag, so
// the commit script may touch all of them): a hash "entries" (delegation id → entry JSON), a
// list "order" of delegation ids in commit order, a set "task:<task id>" per task with
// several delegations (their ids), and a hash "delegations" (task id →
// [Delegation] JSON) for `handoff delegations`. No key has a TTL: the ledger is the record
// of what the agent committed. Entries hold digests and verifier results, never secrets.
//
// Durability is Redis's: "durable when Commit returns" holds with appendonly yes and
// appendfsync always.
type RedisLedger struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ Ledger = (*RedisLedger)(nil)

// NewRedisLedger returns the ledger of namespace on rdb. The caller keeps rdb (the task
// store's client, typically) and closes it; the ledger never does. namespace must be
// non-empty and hold no braces.
func NewRedisLedger(rdb redis.UniversalClient, namespace string) (*RedisLedger, error) {
	if rdb == nil {
		return nil, errors.New("redis ledger: no client")
	}
	if namespace == "" || strings.ContainsAny(namespace, "{}") {
		return nil, fmt.Errorf("redis ledger: namespace %q: must be non-empty, without braces", namespace)
	}
	return &RedisLedger{rdb: rdb, prefix: "handoff:{" + namespace + "}:ledger:"}, nil
}

// Close does nothing: the client belongs to the caller. It is there so both ledgers close
// the same way.
func (l *RedisLedger) Close() error { return nil }

func (l *RedisLedger) entriesKey() string     { return l.prefix + "entries" }
func (l *RedisLedger) orderKey() string       { return l.prefix + "order" }
func (l *RedisLedger) delegationsKey() string { return l.prefix + "delegations" }

// commitScript stores an entry unless its delegation has one, and answers with the stored
// entry either way: the check and the write are one atomic step, so racing replicas leave
// one entry.
//
// KEYS: entries hash, order list, the task's set of delegations (see
// taskKey; the order list again for a delegation that is its task's only
// one). ARGV: delegation id, entry JSON, "1" to add the id to that set.
var commitScript = redis.NewScript(`
local prev = redis.call('HGET', KEYS[1], ARGV[1])
if prev then return prev end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[1])
if ARGV[3] == '1' then redis.call('SADD', KEYS[3], ARGV[1]) end
return ARGV[2]
`)

// Commit implements [Ledger].
func (l *RedisLedger) Commit(ctx context.Context, e *Entry) (*Entry, error) {
	if e == nil || e.DelegationID == "" {
		return nil, errors.New("ledger: an entry needs a delegation id")
	}
	js, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	keys, inTask := []string{l.entriesKey(), l.orderKey(), l.orderKey()}, "0"
	if task := taskOf(e.DelegationID); task != "" {
		keys[2], inTask = l.taskKey(task), "1"
	}
	stored, err := commitScript.Run(ctx, l.rdb, keys, e.DelegationID, js, inTask).Text()
	if err != nil {
		return nil, fmt.Errorf("ledger: commit %s: %w", e.DelegationID, err)
	}
	return decodeEntry([]byte(stored))
}

// Get implements [Ledger].
func (l *RedisLedger) Get(ctx context.Context, delegationID string) (*Entry, error) {
	js, err := l.rdb.HGet(ctx, l.entriesKey(), delegationID).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("delegation %q: %w", delegationID, ErrNotCommitted)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: get %s: %w", delegationID, err)
	}
	return decodeEntry([]byte(js))
}

// listChunk bounds the ids one HMGET asks for.
const listChunk = 512

// List implements [Ledger]. The order list only grows and an id enters it in the same
// script as its entry, so every id read has an entry.
func (l *RedisLedger) List(ctx context.Context, limit int) ([]*Entry, error) {
	start := int64(0)
	if limit > 0 {
		start = -int64(limit)
	}
	order, err := l.rdb.LRange(ctx, l.orderKey(), start, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("ledger: list: %w", err)
	}
	slices.Reverse(order)
	out := make([]*Entry, 0, len(order))
	for chunk := range slices.Chunk(order, listChunk) {
		vals, err := l.rdb.HMGet(ctx, l.entriesKey(), chunk...).Result()
		if err != nil {
			return nil, fmt.Errorf("ledger: list: %w", err)
		}
		for i, v := range vals {
			js, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("ledger: list: delegation %s is ordered but has no entry", chunk[i])
			}
			e, err := decodeEntry([]byte(js))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// Track stores d, replacing the earlier record of the same task.
func (l *RedisLedger) Track(ctx context.Context, d *Delegation) error {
	if d == nil || d.TaskID == "" {
		return errors.New("track delegation: a task id is required")
	}
	js, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("track delegation %s: %w", d.TaskID, err)
	}
	if err := l.rdb.HSet(ctx, l.delegationsKey(), d.TaskID, js).Err(); err != nil {
		return fmt.Errorf("track delegation %s: %w", d.TaskID, err)
	}
	return nil
}

// Delegations returns every tracked delegation, most recently updated first.
func (l *RedisLedger) Delegations(ctx context.Context) ([]*Delegation, error) {
	all, err := l.rdb.HGetAll(ctx, l.delegationsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("list delegations: %w", err)
	}
	out := make([]*Delegation, 0, len(all))
	for k, v := range all {
		var d Delegation
		if err := json.Unmarshal([]byte(v), &d); err != nil {
			return nil, fmt.Errorf("list delegations: corrupt delegation %s: %w", k, err)
		}
		out = append(out, &d)
	}
	slices.SortStableFunc(out, func(a, b *Delegation) int {
		return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(a.TaskID, b.TaskID))
	})
	return out, nil
}
