package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/tasks"
)

var _ tasks.Purger = (*Store)(nil)

// ExpiryGrace is how long after its retention window a finished task's keys
// expire ([WithRetention]): long enough for a purge, which also cleans the
// indexes, to come first.
const ExpiryGrace = 10 * time.Minute

func (s *Store) finishedKey() string          { return s.prefix + "finished" }
func (s *Store) blobKey(digest string) string { return s.prefix + "blob:" + digest }
func (s *Store) purgeMetaKey() string         { return s.prefix + "purge" }

// retained returns a snapshot's score in the finished index (empty unless
// it is finished) and its keys' expiry in milliseconds ("0": none).
func (s *Store) retained(next *tasks.Snapshot) (score, ttl string) {
	if !next.Task.Status.State.Terminal() {
		return "", "0"
	}
	score = strconv.FormatInt(next.Updated.UnixMilli(), 10)
	w := s.keep.Window(next.Owner.Tenant)
	if w <= 0 {
		return score, "0"
	}
	return score, strconv.FormatInt((w + ExpiryGrace).Milliseconds(), 10) // from now: Updated is about now
}

// dropExpired removes, as well as it can, the list entries of a task whose
// keys expired before a purge deleted it: List found it gone. The blobs it
// named are never reported then (their names were in its hash).
func (s *Store) dropExpired(ctx context.Context, owner tasks.Owner, id a2a.TaskID, member string) {
	c, cancel := s.bound(ctx)
	defer cancel()
	pipe := s.rdb.TxPipeline()
	pipe.ZRem(c, s.ownerIndexKey(owner), member)
	if e, ok := parseIndexMember([]byte(member)); ok {
		pipe.ZRem(c, s.stateIndexKey(owner, a2a.TaskState(e.state)), member)
		pipe.ZRem(c, s.contextIndexKey(owner, e.contextID), member)
	}
	// The finished index is the purge's to clean; a failure here, the next
	// List's or purge's to try again.
	pipe.SRem(c, s.unfinishedKey(), string(id))
	_, _ = pipe.Exec(c)
}

// Expired implements [tasks.Purger]. A finished task whose keys Redis
// expired already is returned with its id alone, for Purge to clean its
// index entries.
func (s *Store) Expired(ctx context.Context, r tasks.Retention, now time.Time, limit int) ([]tasks.Expiring, error) {
	shortest := r.Shortest()
	if shortest == 0 || limit <= 0 {
		return nil, nil
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("find expired tasks: %w", err)
	}
	defer cancel()
	horizon := "(" + strconv.FormatInt(now.Add(-shortest).UnixMilli(), 10)
	var out []tasks.Expiring
	for offset := int64(0); len(out) < limit; offset += int64(limit) {
		ids, err := s.rdb.ZRangeByScore(c, s.finishedKey(), &redis.ZRangeBy{Min: "-inf", Max: horizon, Offset: offset, Count: int64(limit)}).Result()
		if err != nil {
			return nil, fmt.Errorf("find expired tasks: %w", s.fail(ctx, err))
		}
		heads, err := s.heads(ctx, c, ids)
		if err != nil {
			return nil, fmt.Errorf("find expired tasks: %w", err)
		}
		for i, h := range heads {
			if h == nil {
				out = append(out, tasks.Expiring{ID: a2a.TaskID(ids[i])})
			} else if r.Expired(h.Owner.Tenant, h.State, h.Updated, now) {
				out = append(out, h.Expiring)
			}
			if len(out) == limit {
				break
			}
		}
		if len(ids) < limit {
			break
		}
	}
	return out, nil
}

// taskHead is what a purge reads of a task before deleting it.
type taskHead struct {
	tasks.Expiring
	contextID string
	member    string
	blobs     []string
}

// heads reads the owner, index member and blobs of each task; nil for a
// task whose hash is gone.
func (s *Store) heads(ctx, c context.Context, ids []string) ([]*taskHead, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(c, s.taskKey(a2a.TaskID(id)), "owner", "member", "blobs")
	}
	if _, err := pipe.Exec(c); err != nil {
		return nil, s.fail(ctx, err)
	}
	out := make([]*taskHead, len(ids))
	for i, cmd := range cmds {
		v := cmd.Val()
		owner, ok1 := v[0].(string)
		member, ok2 := v[1].(string)
		if !ok1 || !ok2 {
			continue
		}
		h := &taskHead{member: member}
		e, ok := parseIndexMember([]byte(member))
		if json.Unmarshal([]byte(owner), &h.Owner) != nil || !ok {
			return nil, fmt.Errorf("%w: task %s", tasks.ErrCorrupt, ids[i])
		}
		h.ID, h.State, h.Updated, h.contextID = a2a.TaskID(ids[i]), a2a.TaskState(e.state), time.Unix(0, e.updated), e.contextID
		if b, ok := v[2].(string); ok && b != "" {
			h.blobs = strings.Fields(b)
		}
		out[i] = h
	}
	return out, nil
}

// purgeScript deletes tasks whose index member is still the one the
// client read (so still finished, with the same update time), with their
// index entries and blob references, and records the purge.
//
// KEYS: finished index, unfinished set, push task set, purge record, then
// per task its hash, event stream, push hash, owner index, push retry hash,
// history list, parts list, state index, context index and the sets of its
// blobs. ARGV: now (ms), the number of tasks, then per task its id,
// member (empty for a task whose hash expired), the number of its blobs and
// their digests. It answers the ids deleted and the digests no task names
// any more.
var purgeScript = redis.NewScript(`
local purged, freed = {}, {}
local k, a = 5, 3
for t = 1, tonumber(ARGV[2]) do
	local id, member, nb = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
	local cur = redis.call('HGET', KEYS[k], 'member')
	if (cur == false and member == '' and redis.call('ZSCORE', KEYS[1], id)) or cur == member then
		redis.call('DEL', KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6])
		if member ~= '' then
			redis.call('ZREM', KEYS[k + 3], member)
			redis.call('ZREM', KEYS[k + 7], member)
			redis.call('ZREM', KEYS[k + 8], member)
		end
		redis.call('ZREM', KEYS[1], id)
		redis.call('SREM', KEYS[2], id)
		redis.call('SREM', KEYS[3], id)
		for j = 1, nb do
			redis.call('SREM', KEYS[k + 8 + j], id)
			if redis.call('SCARD', KEYS[k + 8 + j]) == 0 then table.insert(freed, ARGV[a + 2 + j]) end
		end
		table.insert(purged, id)
	end
	k = k + 9 + nb
	a = a + 3 + nb
end
if #purged > 0 then
	redis.call('HSET', KEYS[4], 'last', ARGV[1], 'count', #purged)
	redis.call('HINCRBY', KEYS[4], 'total', #purged)
end
return {purged, freed}
`)

// Purge implements [tasks.Purger] in one script per call: a task is deleted
// with all its keys or not at all.
func (s *Store) Purge(ctx context.Context, r tasks.Retention, now time.Time, ids []a2a.TaskID) (*tasks.PurgeResult, error) {
	res := &tasks.PurgeResult{}
	if len(ids) == 0 {
		return res, nil
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	defer cancel()
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = string(id)
	}
	heads, err := s.heads(ctx, c, strs)
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", err)
	}
	keys := []string{s.finishedKey(), s.unfinishedKey(), s.pushTasksKey(), s.purgeMetaKey()}
	args := []any{now.UnixMilli(), 0}
	byID := map[string]tasks.Expiring{}
	n := 0
	for i, h := range heads {
		id := a2a.TaskID(strs[i])
		switch {
		case h == nil: // expired by Redis: only index entries are left
			keys = append(keys, s.taskKey(id), s.eventsKey(id), s.pushKey(id), s.finishedKey(), s.pushRetryKey(id), s.histKey(id), s.partsKey(id),
				s.finishedKey(), s.finishedKey())
			args = append(args, strs[i], "", 0)
			byID[strs[i]] = tasks.Expiring{ID: id}
		case r.Expired(h.Owner.Tenant, h.State, h.Updated, now):
			keys = append(keys, s.taskKey(id), s.eventsKey(id), s.pushKey(id), s.ownerIndexKey(h.Owner), s.pushRetryKey(id), s.histKey(id), s.partsKey(id),
				s.stateIndexKey(h.Owner, h.State), s.contextIndexKey(h.Owner, h.contextID))
			args = append(args, strs[i], h.member, len(h.blobs))
			for _, d := range h.blobs {
				keys = append(keys, s.blobKey(d))
				args = append(args, d)
			}
			byID[strs[i]] = h.Expiring
		default:
			continue
		}
		n++
	}
	if n == 0 {
		return res, nil
	}
	args[1] = n
	v, err := purgeScript.Run(c, s.rdb, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("purge tasks: %w", s.fail(ctx, err))
	}
	if len(v) != 2 {
		return nil, fmt.Errorf("purge tasks: %w: script answered %d values", tasks.ErrCorrupt, len(v))
	}
	purged, _ := v[0].([]any)
	freed, _ := v[1].([]any)
	for _, p := range purged {
		if id, ok := p.(string); ok {
			res.Tasks = append(res.Tasks, byID[id])
		}
	}
	for _, f := range freed {
		if d, ok := f.(string); ok {
			res.Blobs = append(res.Blobs, d)
		}
	}
	return res, nil
}

// Stats implements [tasks.Purger]. It scans the namespace's keys: Bytes is
// the sum of their MEMORY USAGE, the commit ledger's and audit log's
// included.
func (s *Store) Stats(ctx context.Context) (*tasks.StoreStats, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("store stats: %w", tasks.ErrClosed)
	}
	c := ctx // a scan of every key takes as long as it takes: the caller bounds it
	st := &tasks.StoreStats{ByState: map[a2a.TaskState]int{}}
	var oldest int64
	err := s.scan(c, s.prefix+"*", func(keys []string) error {
		pipe := s.rdb.Pipeline()
		mem := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			mem[i] = pipe.MemoryUsage(c, k)
		}
		if _, err := pipe.Exec(c); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for i, k := range keys {
			st.Bytes += mem[i].Val()
			if !strings.HasPrefix(k, s.prefix+"owner:") {
				continue
			}
			members, err := s.rdb.ZRange(c, k, 0, -1).Result()
			if err != nil {
				return err
			}
			for _, m := range members {
				e, ok := parseIndexMember([]byte(m))
				if !ok {
					return fmt.Errorf("%w: index member %q", tasks.ErrCorrupt, m)
				}
				st.Tasks++
				st.ByState[a2a.TaskState(e.state)]++
				if st.Oldest == "" || e.updated < oldest {
					oldest, st.Oldest, st.OldestUpdated = e.updated, e.id, time.Unix(0, e.updated)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store stats: %w", s.fail(ctx, err))
	}
	meta, err := s.rdb.HMGet(c, s.purgeMetaKey(), "last", "count", "total").Result()
	if err != nil {
		return nil, fmt.Errorf("store stats: %w", s.fail(ctx, err))
	}
	if last, ok := meta[0].(string); ok {
		ms, _ := strconv.ParseInt(last, 10, 64)
		st.LastPurge = time.UnixMilli(ms)
	}
	if n, ok := meta[1].(string); ok {
		st.LastPurgeCount, _ = strconv.Atoi(n)
	}
	if n, ok := meta[2].(string); ok {
		st.Purged, _ = strconv.ParseInt(n, 10, 64)
	}
	return st, nil
}

// scan calls fn with the keys that match pattern, a batch at a time.
func (s *Store) scan(c context.Context, pattern string, fn func([]string) error) error {
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(c, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}
