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

// What several replicas of one agent share through Redis besides the tasks:
// a lease per running task ("lease:<id>", holding the replica id, with a
// PX TTL the holder renews), the tails of event Streams, and a Pub/Sub
// channel "cancel" on which a replica asks the one running a task to cancel it.

var _ tasks.SharedStore = (*Store)(nil)

func (s *Store) leaseKey(id a2a.TaskID) string { return s.prefix + "lease:" + string(id) }
func (s *Store) cancelChannel() string         { return s.prefix + "cancel" }

// Claim takes the lease of a task for holder unless someone holds it.
func (s *Store) Claim(ctx context.Context, id a2a.TaskID, holder string, ttl time.Duration) (bool, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return false, fmt.Errorf("claim task %s: %w", id, err)
	}
	defer cancel()
	ok, err := s.rdb.SetNX(c, s.leaseKey(id), holder, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("claim task %s: %w", id, s.fail(ctx, err))
	}
	return ok, nil
}

// renewScript extends the leases holder still has and takes back those that
// expired without anyone taking them (Redis was out of reach for a while).
// It returns the (1-based) positions of the keys another replica holds.
//
// KEYS: lease keys. ARGV: holder, TTL in milliseconds.
var renewScript = redis.NewScript(`
local lost = {}
for i, k in ipairs(KEYS) do
	local v = redis.call('GET', k)
	if v == ARGV[1] then
		redis.call('PEXPIRE', k, ARGV[2])
	elseif not v then
		redis.call('SET', k, ARGV[1], 'PX', ARGV[2])
	else
		table.insert(lost, i)
	end
end
return lost
`)

// Renew extends holder's leases of ids; lost lists the ids another replica
// holds now.
func (s *Store) Renew(ctx context.Context, ids []a2a.TaskID, holder string, ttl time.Duration) (lost []a2a.TaskID, err error) {
	if len(ids) == 0 {
		return nil, nil
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	defer cancel()
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.leaseKey(id)
	}
	pos, err := renewScript.Run(c, s.rdb, keys, holder, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", s.fail(ctx, err))
	}
	for _, p := range pos {
		if p >= 1 && int(p) <= len(ids) {
			lost = append(lost, ids[p-1])
		}
	}
	return lost, nil
}

// releaseScript deletes a lease only if holder holds it. KEYS: lease. ARGV: holder.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Release gives up holder's lease of a task; someone else's is left alone.
func (s *Store) Release(ctx context.Context, id a2a.TaskID, holder string) error {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("release task %s: %w", id, err)
	}
	defer cancel()
	if err := releaseScript.Run(c, s.rdb, []string{s.leaseKey(id)}, holder).Err(); err != nil {
		return fmt.Errorf("release task %s: %w", id, s.fail(ctx, err))
	}
	return nil
}

// Holder returns who holds the lease of a task; "" when nobody does.
func (s *Store) Holder(ctx context.Context, id a2a.TaskID) (string, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return "", fmt.Errorf("lease holder of task %s: %w", id, err)
	}
	defer cancel()
	v, err := s.rdb.Get(c, s.leaseKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease holder of task %s: %w", id, s.fail(ctx, err))
	}
	return v, nil
}

// tailBatch bounds the entries one Tail call reads per task.
const tailBatch = 512

// Tail waits up to block for events of the given tasks after the given
// sequence numbers, and returns those that came, in order per task. It
// reads every task in one XREAD, whoever owns them: callers check owners.
func (s *Store) Tail(ctx context.Context, after map[a2a.TaskID]uint64, block time.Duration) (map[a2a.TaskID][]tasks.Event, error) {
	if s.closed.Load() {
		return nil, tasks.ErrClosed
	}
	if len(after) == 0 {
		return nil, nil
	}
	// The block is the command's own wait: the call's bound comes on top.
	c, cancel := context.WithTimeout(ctx, block+s.timeout)
	defer cancel()
	streams := make([]string, 0, 2*len(after))
	ids := make([]string, 0, len(after))
	byKey := make(map[string]a2a.TaskID, len(after))
	for id, seq := range after {
		k := s.eventsKey(id)
		byKey[k] = id
		streams = append(streams, k)
		ids = append(ids, "0-"+strconv.FormatUint(seq, 10))
	}
	res, err := s.rdb.XRead(c, &redis.XReadArgs{Streams: append(streams, ids...), Count: tailBatch, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tail task events: %w", s.fail(ctx, err))
	}
	out := make(map[a2a.TaskID][]tasks.Event, len(res))
	for _, st := range res {
		id := byKey[st.Stream]
		evs, err := decodeEntries(id, st.Messages)
		if err != nil {
			return nil, fmt.Errorf("tail task events: %w", err)
		}
		out[id] = evs
	}
	return out, nil
}

// decodeEntries turns Stream entries (IDs 0-<seq>, field "e") into events.
func decodeEntries(id a2a.TaskID, msgs []redis.XMessage) ([]tasks.Event, error) {
	out := make([]tasks.Event, 0, len(msgs))
	for _, m := range msgs {
		seq, err := strconv.ParseUint(strings.TrimPrefix(m.ID, "0-"), 10, 64)
		v, ok := m.Values["e"].(string)
		if err != nil || !ok {
			return nil, fmt.Errorf("task %s: %w: entry %s", id, tasks.ErrCorrupt, m.ID)
		}
		var sr a2a.StreamResponse
		if err := json.Unmarshal([]byte(v), &sr); err != nil {
			return nil, fmt.Errorf("task %s: %w: event: %v", id, tasks.ErrCorrupt, err)
		}
		out = append(out, tasks.Event{Seq: seq, Event: sr.Event})
	}
	return out, nil
}

// RequestCancel asks the replica running a task to cancel it, and returns
// how many replicas heard the request.
func (s *Store) RequestCancel(ctx context.Context, id a2a.TaskID) (int64, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return 0, fmt.Errorf("request cancel of task %s: %w", id, err)
	}
	defer cancel()
	n, err := s.rdb.Publish(c, s.cancelChannel(), string(id)).Result()
	if err != nil {
		return 0, fmt.Errorf("request cancel of task %s: %w", id, s.fail(ctx, err))
	}
	return n, nil
}

// WatchCancels calls f with the id of every task some replica asks to
// cancel, until ctx ends or the store closes. A request made while Redis
// was out of reach is not heard: the asker falls back on its own.
func (s *Store) WatchCancels(ctx context.Context, f func(a2a.TaskID)) error {
	if s.closed.Load() {
		return tasks.ErrClosed
	}
	ps := s.rdb.Subscribe(ctx, s.cancelChannel())
	defer ps.Close()
	// The channel resubscribes by itself after a lost connection.
	ch := ps.Channel()
	closed := time.NewTicker(time.Second) // the channel does not end with the client
	defer closed.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-closed.C:
			if s.closed.Load() {
				return tasks.ErrClosed
			}
		case m, ok := <-ch:
			if !ok {
				return tasks.ErrClosed
			}
			f(a2a.TaskID(m.Payload))
		}
	}
}
