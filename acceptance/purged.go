package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// taskSep ends the task id in the delegation id of one of several
// delegations of a task (TASK#SKILL-N, a Go executor's): the other
// delegation ids are the task's id.
const taskSep = "#"

// markPurged sets e's TaskPurgedAt unless it was set: the first purge wins.
func markPurged(js []byte, at time.Time) ([]byte, bool, error) {
	e, err := decodeEntry(js)
	if err != nil {
		return nil, false, err
	}
	if !e.TaskPurgedAt.IsZero() {
		return nil, false, nil
	}
	e.TaskPurgedAt = at.UTC()
	b, err := json.Marshal(e)
	return b, err == nil, err
}

// MarkPurged records in the entries of the delegations of tasks (the local
// tasks' ids) that their task was purged at at, and returns how many
// entries it marked. An entry marked before keeps its time; a task without
// an entry is no error.
func (l *BoltLedger) MarkPurged(ctx context.Context, at time.Time, tasks ...string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n := 0
	err := l.db.Update(func(tx *bolt.Tx) error {
		n = 0 // bbolt may run the function again
		entries := tx.Bucket(entriesBucket)
		for _, task := range tasks {
			if task == "" {
				continue
			}
			var keys [][]byte
			if entries.Get([]byte(task)) != nil {
				keys = append(keys, []byte(task))
			}
			prefix := []byte(task + taskSep)
			c := entries.Cursor()
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				keys = append(keys, bytes.Clone(k))
			}
			for _, k := range keys {
				b, marked, err := markPurged(entries.Get(k), at)
				if err != nil {
					return err
				}
				if !marked {
					continue
				}
				if err := entries.Put(k, b); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: mark purged tasks: %w", err)
	}
	return n, nil
}

// taskKey is the set of the delegation ids TASK#... of one task, kept so
// that MarkPurged finds them without scanning the entries.
func (l *RedisLedger) taskKey(task string) string { return l.prefix + "task:" + task }

// markScript replaces entries that exist: only MarkPurged changes an entry
// once committed, and it keeps the first purge's time.
//
// KEYS: entries hash. ARGV: delegation id, entry JSON, in pairs.
var markScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV, 2 do
	if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
		redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
		n = n + 1
	end
end
return n
`)

// MarkPurged is [BoltLedger.MarkPurged] on Redis. The delegations TASK#...
// of entries committed before this method existed are not found.
func (l *RedisLedger) MarkPurged(ctx context.Context, at time.Time, tasks ...string) (int, error) {
	var ids []string
	pipe := l.rdb.Pipeline()
	parts := make([]*redis.StringSliceCmd, 0, len(tasks))
	for _, task := range tasks {
		if task != "" {
			ids = append(ids, task)
			parts = append(parts, pipe.SMembers(ctx, l.taskKey(task)))
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("ledger: mark purged tasks: %w", err)
	}
	for _, p := range parts {
		ids = append(ids, p.Val()...)
	}
	vals, err := l.rdb.HMGet(ctx, l.entriesKey(), ids...).Result()
	if err != nil {
		return 0, fmt.Errorf("ledger: mark purged tasks: %w", err)
	}
	var args []any
	for i, v := range vals {
		js, ok := v.(string)
		if !ok {
			continue
		}
		b, marked, err := markPurged([]byte(js), at)
		if err != nil {
			return 0, err
		}
		if marked {
			args = append(args, ids[i], b)
		}
	}
	n := 0
	if len(args) > 0 {
		if n, err = markScript.Run(ctx, l.rdb, []string{l.entriesKey()}, args...).Int(); err != nil {
			return 0, fmt.Errorf("ledger: mark purged tasks: %w", err)
		}
	}
	return n, nil
}

// taskOf is the task of delegation id when it is one of several of its
// task, else "".
func taskOf(id string) string {
	task, _, ok := strings.Cut(id, taskSep)
	if !ok {
		return ""
	}
	return task
}
