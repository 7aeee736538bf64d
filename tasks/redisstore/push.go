package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/tasks"
)

// The push delivery queue that replicas share: a Stream "pushq" of jobs
// ("deliver what is pending for task T"), read through the consumer group
// "deliver", so each job goes to one replica, which acknowledges (and
// deletes) it once every config of the task has nothing left to deliver.
// Jobs a dead replica held stay pending and are claimed by another after
// they have been idle long enough; a live replica keeps its own fresh. A
// lock "pushlock:<task>" keeps one replica at a time delivering a task.

const pushGroup = "deliver"

// maxPushJobs caps the queue's length; an acknowledged job is deleted at
// once, so only a backlog of this many unclaimed jobs would be trimmed.
const maxPushJobs = 100000

func (s *Store) pushQueueKey() string             { return s.prefix + "pushq" }
func (s *Store) pushLockKey(id a2a.TaskID) string { return s.prefix + "pushlock:" + string(id) }

// pushRetryKey is the hash of a task's requests to retry deliveries now
// (tasks.PushRetry as JSON), field "<config id>\n<request id>": apart from
// the configs, so that the scripts that rewrite a config's state need not
// decode JSON.
func (s *Store) pushRetryKey(id a2a.TaskID) string { return s.prefix + "pushretry:" + string(id) }

// enqueueScript adds a job for a task only if it has push configs, so a
// commit of the (many) tasks without any costs one cheap call.
//
// KEYS: push task set, queue. ARGV: task id, max length.
var enqueueScript = redis.NewScript(`
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 't', ARGV[1])
return 1
`)

// EnqueuePush queues a delivery job for a task that has push configs.
func (s *Store) EnqueuePush(ctx context.Context, task a2a.TaskID) error {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("queue push delivery of task %s: %w", task, err)
	}
	defer cancel()
	if err := enqueueScript.Run(c, s.rdb, []string{s.pushTasksKey(), s.pushQueueKey()}, string(task), maxPushJobs).Err(); err != nil {
		return fmt.Errorf("queue push delivery of task %s: %w", task, s.fail(ctx, err))
	}
	return nil
}

// NextPushJobs returns jobs for consumer: first those other consumers held
// idle for longer than minIdle (their replica died), else new ones,
// waiting up to block for them.
func (s *Store) NextPushJobs(ctx context.Context, consumer string, block, minIdle time.Duration) ([]tasks.PushJob, error) {
	if s.closed.Load() {
		return nil, tasks.ErrClosed
	}
	c, cancel := context.WithTimeout(ctx, block+s.timeout)
	defer cancel()
	key := s.pushQueueKey()
	err := s.rdb.XGroupCreateMkStream(c, key, pushGroup, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return nil, fmt.Errorf("read push jobs: %w", s.fail(ctx, err))
	}
	claimed, _, err := s.rdb.XAutoClaim(c, &redis.XAutoClaimArgs{Stream: key, Group: pushGroup, Consumer: consumer,
		MinIdle: minIdle, Start: "0-0", Count: 100}).Result()
	if err != nil {
		return nil, fmt.Errorf("claim push jobs: %w", s.fail(ctx, err))
	}
	if len(claimed) > 0 {
		return pushJobs(claimed), nil
	}
	res, err := s.rdb.XReadGroup(c, &redis.XReadGroupArgs{Group: pushGroup, Consumer: consumer,
		Streams: []string{key, ">"}, Count: 100, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read push jobs: %w", s.fail(ctx, err))
	}
	var out []tasks.PushJob
	for _, st := range res {
		out = append(out, pushJobs(st.Messages)...)
	}
	return out, nil
}

func pushJobs(msgs []redis.XMessage) []tasks.PushJob {
	out := make([]tasks.PushJob, 0, len(msgs))
	for _, m := range msgs {
		t, _ := m.Values["t"].(string)
		out = append(out, tasks.PushJob{ID: m.ID, Task: a2a.TaskID(t)})
	}
	return out
}

// TouchPushJobs tells the queue consumer still works on its jobs, so no
// other consumer claims them.
func (s *Store) TouchPushJobs(ctx context.Context, consumer string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("touch push jobs: %w", err)
	}
	defer cancel()
	err = s.rdb.XClaimJustID(c, &redis.XClaimArgs{Stream: s.pushQueueKey(), Group: pushGroup, Consumer: consumer, Messages: ids}).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("touch push jobs: %w", s.fail(ctx, err))
	}
	return nil
}

// AckPushJobs acknowledges and deletes done jobs.
func (s *Store) AckPushJobs(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("acknowledge push jobs: %w", err)
	}
	defer cancel()
	pipe := s.rdb.TxPipeline()
	pipe.XAck(c, s.pushQueueKey(), pushGroup, ids...)
	pipe.XDel(c, s.pushQueueKey(), ids...)
	if _, err := pipe.Exec(c); err != nil {
		return fmt.Errorf("acknowledge push jobs: %w", s.fail(ctx, err))
	}
	return nil
}

// LockPushTask takes (or, for its holder, extends) the lock of a task's
// deliveries.
func (s *Store) LockPushTask(ctx context.Context, task a2a.TaskID, holder string, ttl time.Duration) (bool, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return false, fmt.Errorf("lock push deliveries of task %s: %w", task, err)
	}
	defer cancel()
	lost, err := renewScript.Run(c, s.rdb, []string{s.pushLockKey(task)}, holder, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("lock push deliveries of task %s: %w", task, s.fail(ctx, err))
	}
	return len(lost) == 0, nil
}

// UnlockPushTask gives up holder's lock of a task's deliveries.
func (s *Store) UnlockPushTask(ctx context.Context, task a2a.TaskID, holder string) error {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("unlock push deliveries of task %s: %w", task, err)
	}
	defer cancel()
	if err := releaseScript.Run(c, s.rdb, []string{s.pushLockKey(task)}, holder).Err(); err != nil {
		return fmt.Errorf("unlock push deliveries of task %s: %w", task, s.fail(ctx, err))
	}
	return nil
}

// LaggingPushTasks returns the tasks with a push config that has events
// left to deliver (or an operator's request to retry) and no delivery under way (no failed attempt waiting for
// its retry): those whose job may have been lost with a replica that died
// between storing the events and queueing the job.
func (s *Store) LaggingPushTasks(ctx context.Context) ([]a2a.TaskID, error) {
	pds, err := s.PushDeliveries(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("lagging push tasks: %w", err)
	}
	if len(pds) == 0 {
		return nil, nil
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("lagging push tasks: %w", err)
	}
	defer cancel()
	pipe := s.rdb.Pipeline()
	versions := map[a2a.TaskID]*redis.StringCmd{}
	for _, pd := range pds {
		if _, ok := versions[pd.Config.TaskID]; !ok {
			versions[pd.Config.TaskID] = pipe.HGet(c, s.taskKey(pd.Config.TaskID), "version")
		}
	}
	if _, err := pipe.Exec(c); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("lagging push tasks: %w", s.fail(ctx, err))
	}
	var out []a2a.TaskID
	for _, pd := range pds {
		v, err := versions[pd.Config.TaskID].Uint64()
		if err != nil || pd.Attempts > 0 || (pd.Delivered >= v && len(pd.Retries) == 0) {
			continue // a request to retry is work too: its job may have been lost the same way
		}
		if len(out) == 0 || out[len(out)-1] != pd.Config.TaskID { // configs come grouped by task
			out = append(out, pd.Config.TaskID)
		}
	}
	return out, nil
}

// addRetryScript stores a request to retry if its config exists. The
// request expires with the task: a finished task's keys all carry its
// retention's expiry (retention.go).
//
// KEYS: push hash, push retry hash, task hash. ARGV: config id, field, request.
var addRetryScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 1 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local ttl = redis.call('PTTL', KEYS[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 0
`)

// AddPushRetry stores an operator's request to deliver now beside the push
// config, where the delivery worker of whichever replica delivers the task
// finds it (also after a restart); ErrNotFound if the config does not exist.
func (s *Store) AddPushRetry(ctx context.Context, task a2a.TaskID, config string, r tasks.PushRetry) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("add push retry to %s of task %s: encode: %w", config, task, err)
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("add push retry to %s of task %s: %w", config, task, err)
	}
	defer cancel()
	code, err := addRetryScript.Run(c, s.rdb, []string{s.pushKey(task), s.pushRetryKey(task), s.taskKey(task)}, config, config+"\n"+r.ID, b).Int64()
	if err == nil {
		err = scriptErr(code)
	} else {
		err = s.fail(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("add push retry to %s of task %s: %w", config, task, err)
	}
	return nil
}

// RemovePushRetry drops a request the delivery worker has handled; one
// that is gone already is not an error.
func (s *Store) RemovePushRetry(ctx context.Context, task a2a.TaskID, config, id string) error {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("remove push retry %s from %s of task %s: %w", id, config, task, err)
	}
	defer cancel()
	if err := s.rdb.HDel(c, s.pushRetryKey(task), config+"\n"+id).Err(); err != nil {
		return fmt.Errorf("remove push retry %s from %s of task %s: %w", id, config, task, s.fail(ctx, err))
	}
	return nil
}

// attachRetries gives each of one task's configs its requests to retry
// (fields of the task's retry hash), oldest first; a request whose config
// is gone is left out.
func attachRetries(pds []*tasks.PushDelivery, fields map[string]string) error {
	if len(fields) == 0 {
		return nil
	}
	byConfig := map[string]*tasks.PushDelivery{}
	for _, pd := range pds {
		byConfig[pd.Config.ID] = pd
	}
	for f, v := range fields {
		config := f[:max(strings.LastIndexByte(f, '\n'), 0)] // a config id may hold a newline, a request id does not
		pd := byConfig[config]
		if pd == nil {
			continue
		}
		var r tasks.PushRetry
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return fmt.Errorf("%w: push retry of %s", tasks.ErrCorrupt, config)
		}
		pd.Retries = append(pd.Retries, r)
	}
	for _, pd := range pds {
		slices.SortFunc(pd.Retries, func(a, b tasks.PushRetry) int {
			if c := a.At.Compare(b.At); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
	}
	return nil
}
