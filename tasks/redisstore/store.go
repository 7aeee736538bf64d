package redisstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	neturl "net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/internal/record"
)

// ErrUnavailable means the store's server could not be reached or did not
// answer in time. The call had no effect, or (for a write whose reply was
// lost) may have taken effect once: a retried [Store.Append] of the same
// snapshot succeeds without writing it twice.
var ErrUnavailable = errors.New("store unavailable")

// Store is a [tasks.Store] in Redis, shared by every replica of one agent.
//
// Every key starts with "handoff:{namespace}:", so several agents can share
// one Redis; the braces make the namespace a Cluster hash tag, which keeps an
// agent's keys in one slot so the scripts below may touch several of them.
// Per task it keeps a hash "task:<id>" (owner, version, index member, the
// snapshot's head and the counts an append checks), lists "hist:<id>" and
// "parts:<id>" of its history entries and artifact parts, each written once
// (layout.go), a Stream "events:<id>" whose entry IDs are 0-<seq>, and a
// hash "push:<id>" of push configs with their delivery state (field = config
// id). Per owner a sorted set "owner:<owner>" indexes the tasks newest first,
// and sorted sets "state:<owner>:<state>" and "context:<owner>:<context>"
// the same members by state and by context, which List pages and counts;
// the set "unfinished" holds submitted and working tasks, and "pushtasks" the
// tasks that have push configs; the sorted set "finished" (score: the update
// time in milliseconds) the finished tasks, and a set "blob:<digest>" per
// blob the tasks that name it (see [WithBlobIndex]). With [WithRetention] a
// finished task's keys expire a while after its window (see retention.go);
// otherwise no key has a TTL: tasks and their logs are the record of what
// the agent did, as in the embedded store.
//
// Push configs' tokens and credentials are sealed with [WithSealer]'s keys
// before they reach Redis; without it they are stored as given.
//
// Durability is Redis's: Append's promise that a returned write survives a
// crash holds with appendonly yes and appendfsync always.
type Store struct {
	rdb     redis.UniversalClient
	prefix  string
	timeout time.Duration
	closed  atomic.Bool
	sealer  *tasks.Sealer // nil: push secrets stored as given
	keep    tasks.Retention
	blobs   *tasks.BlobIndex
}

var _ tasks.Store = (*Store)(nil)

// Open connects to the Redis at url and checks that it answers. The URL
// names one server (redis://[USER:PASSWORD@]HOST:PORT/DB, rediss:// or
// unix://, as go-redis's ParseURL reads them); with a master_name parameter
// the host and each addr parameter are Sentinels
// (redis://S1:26379/0?master_name=mymaster&addr=S2:26379); with addr
// parameters only they are Cluster seed nodes
// (redis://N1:6379?addr=N2:6379&addr=N3:6379). namespace prefixes every key;
// it must be non-empty and hold no braces.
func Open(ctx context.Context, url string, namespace string, opts ...Option) (*Store, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if namespace == "" || strings.ContainsAny(namespace, "{}") {
		return nil, fmt.Errorf("open redis task store: namespace %q: must be non-empty, without braces", namespace)
	}
	uo, network, err := universalOptions(url)
	if err != nil {
		return nil, fmt.Errorf("open redis task store: %w", err)
	}
	uo.DialTimeout, uo.ReadTimeout, uo.WriteTimeout, uo.PoolTimeout = cfg.timeout, cfg.timeout, cfg.timeout, cfg.timeout
	// One retry replaces a pooled connection that died with a restarted
	// server; more would multiply the time a down server holds a call.
	uo.MaxRetries, uo.DialerRetries, uo.ContextTimeoutEnabled = 1, 1, true
	if network == "unix" {
		uo.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: cfg.timeout}
			return d.DialContext(ctx, "unix", addr)
		}
	}
	s := &Store{rdb: redis.NewUniversalClient(uo), prefix: "handoff:{" + namespace + "}:", timeout: cfg.timeout, sealer: cfg.sealer,
		keep: cfg.keep, blobs: cfg.blobs}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.rdb.Ping(cctx).Err(); err != nil {
		s.rdb.Close()
		return nil, fmt.Errorf("open redis task store at %s: %w", strings.Join(uo.Addrs, ","), s.fail(ctx, err))
	}
	if err := s.buildIndexes(ctx); err != nil {
		s.rdb.Close()
		return nil, fmt.Errorf("open redis task store: build list indexes: %w", s.fail(ctx, err))
	}
	return s, nil
}

// universalOptions reads a store URL in one of three forms: one server
// (redis://[USER:PASSWORD@]HOST:PORT/DB, rediss://, unix://), Sentinel (a
// master_name parameter: the host and each addr parameter are sentinels),
// or Cluster (addr parameters: the host and each addr are seed nodes).
func universalOptions(url string) (_ *redis.UniversalOptions, network string, err error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, "", errors.New("store URL does not parse") // url.Error would repeat the URL
	}
	// go-redis's parse errors may quote parts of the URL: never its password.
	defer func() {
		if p, ok := u.User.Password(); ok && err != nil && p != "" && strings.Contains(err.Error(), p) {
			err = errors.New(strings.ReplaceAll(err.Error(), p, "REDACTED"))
		}
	}()
	q := u.Query()
	switch {
	case q.Has("master_name"):
		o, err := redis.ParseFailoverURL(url)
		if err != nil {
			return nil, "", err
		}
		return &redis.UniversalOptions{Addrs: o.SentinelAddrs, MasterName: o.MasterName,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			ClientName: o.ClientName, DB: o.DB, Protocol: o.Protocol, Username: o.Username, Password: o.Password,
			TLSConfig: o.TLSConfig, PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns}, "", nil
	case q.Has("addr"):
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, "", err
		}
		return &redis.UniversalOptions{Addrs: o.Addrs, IsClusterMode: true,
			ClientName: o.ClientName, Protocol: o.Protocol, Username: o.Username, Password: o.Password,
			TLSConfig: o.TLSConfig, PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns}, "", nil
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", err
	}
	return &redis.UniversalOptions{Addrs: []string{o.Addr},
		ClientName: o.ClientName, DB: o.DB, Protocol: o.Protocol, Username: o.Username, Password: o.Password,
		TLSConfig: o.TLSConfig, PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns}, o.Network, nil
}

// Close closes the connections. Calls after Close fail with [tasks.ErrClosed].
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	return s.rdb.Close()
}

// Client returns the store's Redis client, for the agent's other stores that
// replicas share (the commit ledger, the audit log): they use its connections
// and timeouts. The store owns it: Close closes it.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Ping checks that Redis answers, within the store's timeout; readiness
// checks use it.
func (s *Store) Ping(ctx context.Context) error {
	if s.closed.Load() {
		return tasks.ErrClosed
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", s.fail(ctx, err))
	}
	return nil
}

// bound gives a call the store's timeout unless ctx ends sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.timeout)
}

// start checks the store is open and bounds the call.
func (s *Store) start(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, tasks.ErrClosed
	}
	c, cancel := s.bound(ctx)
	return c, cancel, nil
}

// fail maps a go-redis error to the store's errors. ctx is the caller's:
// its own cancellation is reported as is, while the store's timeout means
// Redis did not answer.
func (s *Store) fail(ctx context.Context, err error) error {
	var rerr redis.Error
	switch {
	case errors.Is(err, redis.Nil):
		return tasks.ErrNotFound
	case errors.Is(err, redis.ErrClosed):
		return tasks.ErrClosed
	case ctx.Err() != nil:
		return err
	case errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "OOM "):
		// maxmemory with noeviction. A script without flags is refused at its
		// first write command and runs to its end once that one is taken
		// (appendScript reads before it writes), so nothing of it was stored.
		return fmt.Errorf("%w: %w", tasks.ErrStoreFull, err)
	case errors.As(err, &rerr) && !transientReply(rerr.Error()):
		return err // a reply from a working server: a bug, not an outage
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// transientReply reports whether a Redis error reply means the server cannot
// serve right now (loading its data after a restart, a failover, a script
// running too long) rather than that the command was wrong.
func transientReply(msg string) bool {
	for _, p := range []string{"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func (s *Store) taskKey(id a2a.TaskID) string   { return s.prefix + "task:" + string(id) }
func (s *Store) eventsKey(id a2a.TaskID) string { return s.prefix + "events:" + string(id) }
func (s *Store) pushKey(id a2a.TaskID) string   { return s.prefix + "push:" + string(id) }
func (s *Store) unfinishedKey() string          { return s.prefix + "unfinished" }
func (s *Store) pushTasksKey() string           { return s.prefix + "pushtasks" }

func (s *Store) ownerIndexKey(o tasks.Owner) string {
	return s.prefix + "owner:" + base64.RawURLEncoding.EncodeToString(record.OwnerKey(o))
}

// The owner's tasks in one state, and in one context: sorted sets with the
// owner index's members, so that List by state or by context reads one
// page of them and counts them with ZLEXCOUNT.
func (s *Store) stateIndexKey(o tasks.Owner, state a2a.TaskState) string {
	return s.prefix + "state:" + base64.RawURLEncoding.EncodeToString(record.OwnerKey(o)) + ":" + string(state)
}

func (s *Store) contextIndexKey(o tasks.Owner, contextID string) string {
	return s.prefix + "context:" + base64.RawURLEncoding.EncodeToString(record.OwnerKey(o)) + ":" +
		base64.RawURLEncoding.EncodeToString([]byte(contextID))
}

func (s *Store) indexesKey() string { return s.prefix + "indexes" }

// buildIndexes fills the state and context indexes from the owner indexes
// in a namespace written before they existed, once: the key indexesKey says
// it is done. A namespace without tasks (neither an unfinished nor a
// finished set) needs no scan.
func (s *Store) buildIndexes(ctx context.Context) error {
	c, cancel := s.bound(ctx)
	defer cancel()
	n, err := s.rdb.Exists(c, s.indexesKey()).Result()
	if err != nil || n == 1 {
		return err
	}
	if n, err = s.rdb.Exists(c, s.unfinishedKey(), s.finishedKey()).Result(); err != nil {
		return err
	}
	if n > 0 {
		// A scan of every key takes as long as it takes: the caller bounds it.
		if err := s.scan(ctx, s.prefix+"owner:*", func(keys []string) error { return s.indexOwners(ctx, keys) }); err != nil {
			return err
		}
	}
	return s.rdb.Set(c, s.indexesKey(), "1", 0).Err()
}

// indexOwners adds the members of owner indexes to the state and context
// indexes.
func (s *Store) indexOwners(ctx context.Context, keys []string) error {
	for _, k := range keys {
		ok, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(k, s.prefix+"owner:"))
		if err != nil {
			return fmt.Errorf("%w: owner index %q", tasks.ErrCorrupt, k)
		}
		owner, err := decodeOwnerKey(ok)
		if err != nil {
			return fmt.Errorf("%w: owner index %q", err, k)
		}
		members, err := s.rdb.ZRange(ctx, k, 0, -1).Result()
		if err != nil {
			return err
		}
		pipe := s.rdb.Pipeline()
		for _, m := range members {
			e, ok := parseIndexMember([]byte(m))
			if !ok {
				return fmt.Errorf("%w: index member %q", tasks.ErrCorrupt, m)
			}
			pipe.ZAdd(ctx, s.stateIndexKey(owner, a2a.TaskState(e.state)), redis.Z{Member: m})
			pipe.ZAdd(ctx, s.contextIndexKey(owner, e.contextID), redis.Z{Member: m})
		}
		if len(members) > 0 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeOwnerKey reverses record.OwnerKey.
func decodeOwnerKey(b []byte) (tasks.Owner, error) {
	var parts [2]string
	for i := range parts {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return tasks.Owner{}, tasks.ErrCorrupt
		}
		parts[i], b = string(b[w:w+int(n)]), b[w+int(n):]
	}
	if len(b) != 0 {
		return tasks.Owner{}, tasks.ErrCorrupt
	}
	return tasks.Owner{Principal: parts[0], Tenant: parts[1]}, nil
}

// ownerID is how an owner is compared inside scripts: Go's JSON encoding of
// a struct is deterministic and, unlike ownerKey, never holds a newline.
func ownerID(o tasks.Owner) string {
	b, _ := json.Marshal(o) // two strings: cannot fail
	return string(b)
}

// The index member of a task: its inverted update time (so the members of an
// owner's zero-score sorted set sort newest first, like the embedded store's
// keys), the task id escaped so that it sorts as itself and ends
// unambiguously (0x00 becomes 00 FF, the end is 00 01), then its state, 0x00
// and its context id, which List filters on without reading the tasks.
// Scores are float64 and cannot hold a nanosecond time, hence lexical order.
func indexMember(updated time.Time, id a2a.TaskID, state a2a.TaskState, contextID string) string {
	b := binary.BigEndian.AppendUint64(nil, math.MaxUint64-uint64(updated.UnixNano()))
	for i := 0; i < len(id); i++ {
		if id[i] == 0 {
			b = append(b, 0, 0xff)
		} else {
			b = append(b, id[i])
		}
	}
	b = append(b, 0, 1)
	b = append(b, state...)
	b = append(b, 0)
	return string(append(b, contextID...))
}

// indexEntry is a decoded index member. cursor is the member up to the end
// of the id: what a page token holds.
type indexEntry struct {
	updated   int64
	id        a2a.TaskID
	state     string
	contextID string
	cursor    []byte
}

func parseIndexMember(m []byte) (indexEntry, bool) {
	if len(m) < 10 {
		return indexEntry{}, false
	}
	e := indexEntry{updated: int64(math.MaxUint64 - binary.BigEndian.Uint64(m))}
	var id []byte
	for i := 8; i+1 < len(m); i++ {
		if m[i] != 0 {
			id = append(id, m[i])
			continue
		}
		switch m[i+1] {
		case 0xff:
			id = append(id, 0)
			i++
		case 1:
			e.id, e.cursor = a2a.TaskID(id), m[:i+2]
			state, ctxID, _ := bytes.Cut(m[i+2:], []byte{0})
			e.state, e.contextID = string(state), string(ctxID)
			return e, true
		default:
			return indexEntry{}, false
		}
	}
	return indexEntry{}, false
}

// Script results: what the scripts return besides writing.
const (
	scriptOK       = 0
	scriptNotFound = 1
	scriptConflict = 2
	scriptCorrupt  = 3
)

func scriptErr(code int64) error {
	switch code {
	case scriptOK:
		return nil
	case scriptNotFound:
		return tasks.ErrNotFound
	case scriptConflict:
		return tasks.ErrConflict
	case scriptCorrupt:
		return tasks.ErrCorrupt
	}
	return fmt.Errorf("script answered %d: %w", code, tasks.ErrCorrupt)
}

// appendScript checks the stored version and owner, then writes the events,
// the snapshot's head and what it adds to the history and parts lists (see
// layout.go), the owner index, the unfinished set, and what retention
// needs: the finished index, the blobs the task names, the keys' expiry.
// Every check comes before the first write: a Lua script that stops
// half-way is not rolled back. It answers scriptRewrite, having written
// nothing, when an append of the tail alone does not add up with the stored
// counts (or the task is in the old layout): the caller sends it whole.
//
// KEYS: task hash, event stream, owner index, unfinished set, finished
// index, push hash, history list, parts list, context index, state index
// (of the new state), then the blob sets of the blobs the task names.
// ARGV: owner, next version, event count n, head, index member,
// unfinished ("1" or "0"), task id, finished score (empty unless the task
// is finished), expiry in milliseconds ("0": none), the blobs' digests
// (space-separated), whole ("1": rewrite the lists), history length,
// history entries sent k, artifacts, artifacts the events add, parts in
// all, parts entries sent p, the state indexes' common prefix, then the n
// events, the k history entries and the p parts entries.
var appendScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'owner', 'version', 'member', 'narts', 'nparts', 'record')
local prev = 0
if cur[1] then
	if cur[1] ~= ARGV[1] then return 1 end
	prev = tonumber(cur[2])
	if not prev or not cur[3] then return 3 end
elseif redis.call('EXISTS', KEYS[2]) == 1 then
	return 3
end
local n = tonumber(ARGV[3])
local nextv = tonumber(ARGV[2])
if nextv ~= prev + n then
	-- A write retried after its reply was lost has already landed.
	if n > 0 and nextv == prev and redis.call('HGET', KEYS[1], 'head') == ARGV[4] then return 0 end
	return 2
end
local whole = ARGV[11] == '1'
local hn, k = tonumber(ARGV[12]), tonumber(ARGV[13])
local p = tonumber(ARGV[17])
local hfrom = 1 -- the first history entry sent that the list lacks
if not whole then
	if cur[6] or not cur[1] then return 4 end
	local h = redis.call('LLEN', KEYS[7])
	if h < hn - k or h > hn then return 4 end
	hfrom = h - (hn - k) + 1
	-- The entries sent that the list holds must be the same: Apply only
	-- appends to the history, but a snapshot may be any.
	if hfrom > 1 then
		local have = redis.call('LRANGE', KEYS[7], hn - k, h - 1)
		for i = 1, hfrom - 1 do
			if have[i] ~= ARGV[18 + n + i] then return 4 end
		end
	end
	if (tonumber(cur[4]) or -1) + tonumber(ARGV[15]) ~= tonumber(ARGV[14]) then return 4 end
	if (tonumber(cur[5]) or -1) + p ~= tonumber(ARGV[16]) then return 4 end
end
for i = 1, n do
	redis.call('XADD', KEYS[2], string.format('0-%d', prev + i), 'e', ARGV[18 + i])
end
if whole and cur[1] then redis.call('DEL', KEYS[7], KEYS[8]) end -- a new task has no lists yet
-- RPUSH in batches: unpack's results must fit Lua's stack.
local function push(key, from, to)
	for i = from, to, 1000 do redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, to))) end
end
push(KEYS[7], 18 + n + hfrom, 18 + n + k)
push(KEYS[8], 19 + n + k, 18 + n + k + p)
if cur[3] then
	redis.call('ZREM', KEYS[3], cur[3])
	redis.call('ZREM', KEYS[9], cur[3])
	-- The state index the task was in, named after the state in its old
	-- member (after the id's end, 00 01, up to 00), in the same slot.
	local _, e = string.find(cur[3], '\0\1', 9, true)
	local st = e and string.match(cur[3], '^[^%z]*', e + 1)
	if st then redis.call('ZREM', ARGV[18] .. st, cur[3]) end
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'version', ARGV[2], 'member', ARGV[5], 'head', ARGV[4], 'narts', ARGV[14], 'nparts', ARGV[16])
redis.call('ZADD', KEYS[9], 0, ARGV[5])
redis.call('ZADD', KEYS[10], 0, ARGV[5])
if cur[6] then redis.call('HDEL', KEYS[1], 'record') end
redis.call('ZADD', KEYS[3], 0, ARGV[5])
if ARGV[6] == '1' then
	redis.call('SADD', KEYS[4], ARGV[7])
else
	redis.call('SREM', KEYS[4], ARGV[7])
end
if ARGV[8] ~= '' then redis.call('ZADD', KEYS[5], ARGV[8], ARGV[7]) end
if ARGV[10] ~= '' then
	redis.call('HSET', KEYS[1], 'blobs', ARGV[10])
	for i = 11, #KEYS do redis.call('SADD', KEYS[i], ARGV[7]) end
end
local ttl = tonumber(ARGV[9])
if ttl and ttl > 0 then
	for i = 1, 8 do
		if i ~= 3 and i ~= 4 and i ~= 5 then redis.call('PEXPIRE', KEYS[i], ttl) end
	end
end
return 0
`)

// scriptRewrite is appendScript's answer that the task must be sent whole.
const scriptRewrite = 4

// Append implements [tasks.Store] in one script: the version check and every
// write happen in Redis, with nothing read first by the client. An append
// sends the snapshot's head and what the events added to its history and
// artifacts; only when that does not add up with what is stored (a task
// event replaced everything, an artifact was replaced, an old-layout task)
// does a second call send the task whole.
func (s *Store) Append(ctx context.Context, next *tasks.Snapshot, events []a2a.Event) error {
	if next == nil || next.Task == nil || next.Task.ID == "" {
		return fmt.Errorf("append: snapshot without a task id")
	}
	id := next.Task.ID
	head, err := encodeHead(next)
	if err != nil {
		return fmt.Errorf("append to task %s: encode snapshot: %w", id, err)
	}
	evs := make([]any, 0, len(events))
	for _, ev := range events {
		b, err := json.Marshal(a2a.StreamResponse{Event: ev})
		if err != nil {
			return fmt.Errorf("append to task %s: encode event: %w", id, err)
		}
		evs = append(evs, b)
	}
	unfinished := "0"
	if tasks.IsUnfinished(next.Task.Status.State) {
		unfinished = "1"
	}
	score, ttl := s.retained(next)
	var blobs []string
	if s.blobs != nil && s.blobs.Digests != nil {
		blobs = s.blobs.Digests(next.Task)
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("append to task %s: %w", id, err)
	}
	defer cancel()
	keys := []string{s.taskKey(id), s.eventsKey(id), s.ownerIndexKey(next.Owner), s.unfinishedKey(), s.finishedKey(), s.pushKey(id),
		s.histKey(id), s.partsKey(id), s.contextIndexKey(next.Owner, next.Task.ContextID), s.stateIndexKey(next.Owner, next.Task.Status.State)}
	for _, d := range blobs {
		keys = append(keys, s.blobKey(d))
	}
	member := indexMember(next.Updated, id, next.Task.Status.State, next.Task.ContextID)
	whole := next.Version == uint64(len(events)) // a new task
	for {
		tl, err := appendTail(next, events, whole)
		if err != nil {
			return fmt.Errorf("append to task %s: %w", id, err)
		}
		wholeArg := "0"
		if tl.full {
			wholeArg = "1"
		}
		args := make([]any, 0, 18+len(evs)+len(tl.hist)+len(tl.parts))
		args = append(args, ownerID(next.Owner), strconv.FormatUint(next.Version, 10), len(events), head,
			member, unfinished, string(id), score, ttl, strings.Join(blobs, " "),
			wholeArg, len(next.Task.History), len(tl.hist), len(next.Task.Artifacts), tl.newArts, tl.nparts, len(tl.parts),
			s.stateIndexKey(next.Owner, ""))
		args = append(args, evs...)
		args = append(args, tl.hist...)
		args = append(args, tl.parts...)
		code, err := appendScript.Run(c, s.rdb, keys, args...).Int64()
		if err != nil {
			return fmt.Errorf("append to task %s: %w", id, s.fail(ctx, err))
		}
		if code == scriptRewrite && !tl.full {
			whole = true
			continue
		}
		if err := scriptErr(code); err != nil {
			return fmt.Errorf("append to task %s: %w", id, err)
		}
		return nil
	}
}

// Get implements [tasks.Store].
func (s *Store) Get(ctx context.Context, owner tasks.Owner, id a2a.TaskID) (*tasks.Snapshot, error) {
	snap, err := s.load(ctx, id, -1)
	if err == nil && snap.Owner != owner {
		err = tasks.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return snap, nil
}

var _ tasks.HistoryReader = (*Store)(nil)

// GetRecent implements [tasks.HistoryReader]: it reads the tail of the
// task's history list, so its cost does not grow with the history.
func (s *Store) GetRecent(ctx context.Context, owner tasks.Owner, id a2a.TaskID, historyLength int) (*tasks.Snapshot, error) {
	snap, err := s.load(ctx, id, max(historyLength, 0))
	if err == nil && snap.Owner != owner {
		err = tasks.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	return snap, nil
}

// OwnerOf implements [tasks.Store].
func (s *Store) OwnerOf(ctx context.Context, id a2a.TaskID) (tasks.Owner, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return tasks.Owner{}, fmt.Errorf("owner of task %s: %w", id, err)
	}
	defer cancel()
	b, err := s.rdb.HGet(c, s.taskKey(id), "owner").Bytes()
	if err != nil {
		return tasks.Owner{}, fmt.Errorf("owner of task %s: %w", id, s.fail(ctx, err))
	}
	var o tasks.Owner
	if err := json.Unmarshal(b, &o); err != nil {
		return tasks.Owner{}, fmt.Errorf("owner of task %s: %w: %v", id, tasks.ErrCorrupt, err)
	}
	return o, nil
}

// load reads a task's snapshot whoever owns it, with the newest history
// entries of it (all with history < 0). Its reads are one transaction: an
// append cannot land between the head and the lists.
func (s *Store) load(ctx context.Context, id a2a.TaskID, history int) (*tasks.Snapshot, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	r, err := s.readTasks(ctx, c, []a2a.TaskID{id}, history, true)
	if err != nil {
		return nil, err
	}
	return r[0].snapshot(id, history, true)
}

// Events implements [tasks.Store]. The owner check and the range read travel in
// one pipeline; a task's owner never changes, so they need no transaction.
func (s *Store) Events(ctx context.Context, owner tasks.Owner, id a2a.TaskID, after uint64) ([]tasks.Event, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("read events of task %s: %w", id, err)
	}
	defer cancel()
	pipe := s.rdb.Pipeline()
	own := pipe.HGet(c, s.taskKey(id), "owner")
	rng := pipe.XRange(c, s.eventsKey(id), "(0-"+strconv.FormatUint(after, 10), "+")
	if _, err := pipe.Exec(c); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read events of task %s: %w", id, s.fail(ctx, err))
	}
	if own.Err() != nil || own.Val() != ownerID(owner) {
		return nil, fmt.Errorf("read events of task %s: %w", id, tasks.ErrNotFound)
	}
	out, err := decodeEntries(id, rng.Val())
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// List implements [tasks.Store]. It reads the owner's whole index (small
// members, filtered here), then the snapshots of one page.
func (s *Store) List(ctx context.Context, q tasks.ListQuery) (*tasks.ListPage, error) {
	var start []byte
	if q.PageToken != "" {
		tok, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", tasks.ErrInvalidPageToken)
		}
		if e, ok := parseIndexMember(tok); !ok || len(e.cursor) != len(tok) {
			return nil, fmt.Errorf("list tasks: %w", tasks.ErrInvalidPageToken)
		}
		start = tok
	}
	pageSize := q.PageSize
	if pageSize <= 0 {
		pageSize = 50
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer cancel()
	upTo := "+"
	if q.UpdatedAfter != nil { // members below this one were updated after it
		upTo = "(" + string(binary.BigEndian.AppendUint64(nil, math.MaxUint64-uint64(q.UpdatedAfter.UnixNano())))
	}
	page := &tasks.ListPage{}
	var ids []a2a.TaskID
	var mems []string
	if q.State != "" && q.ContextID != "" {
		ids, mems, err = s.listFiltered(ctx, c, q, start, upTo, pageSize, page)
	} else {
		ids, mems, err = s.listIndexed(ctx, c, q, start, upTo, pageSize, page)
	}
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	if len(ids) == 0 {
		return page, nil
	}
	history := -1
	if q.HistoryLength != nil {
		history = max(*q.HistoryLength, 0)
	}
	reads, err := s.readTasks(ctx, c, ids, history, !q.SkipArtifacts)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	for i, id := range ids {
		snap, err := reads[i].snapshot(id, history, !q.SkipArtifacts)
		// A task in the index has a snapshot (both are written by one
		// script) unless its keys expired before a purge came (retention.go).
		if errors.Is(err, tasks.ErrNotFound) {
			page.TotalSize--
			s.dropExpired(ctx, q.Owner, id, mems[i])
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		page.Tasks = append(page.Tasks, snap)
	}
	return page, nil
}

// listIndexed reads one page of the index that holds exactly the tasks q
// selects (the owner's, or those of one state, or of one context) and
// counts them, in one round trip.
func (s *Store) listIndexed(ctx, c context.Context, q tasks.ListQuery, start []byte, upTo string, pageSize int, page *tasks.ListPage) ([]a2a.TaskID, []string, error) {
	key := s.ownerIndexKey(q.Owner)
	switch {
	case q.ContextID != "":
		key = s.contextIndexKey(q.Owner, q.ContextID)
	case q.State != "":
		key = s.stateIndexKey(q.Owner, q.State)
	}
	from := "-"
	if start != nil {
		// Past every member of the token's task: 0xFF sorts after its state.
		from = "(" + string(start) + "\xff"
	}
	pipe := s.rdb.Pipeline()
	count := pipe.ZLexCount(c, key, "-", upTo)
	rng := pipe.ZRangeByLex(c, key, &redis.ZRangeBy{Min: from, Max: upTo, Count: int64(pageSize) + 1})
	if _, err := pipe.Exec(c); err != nil {
		return nil, nil, s.fail(ctx, err)
	}
	page.TotalSize = int(count.Val())
	var ids []a2a.TaskID
	var mems []string
	for i, m := range rng.Val() {
		e, ok := parseIndexMember([]byte(m))
		if !ok {
			return nil, nil, fmt.Errorf("%w: index member %q", tasks.ErrCorrupt, m)
		}
		if i == pageSize {
			last, _ := parseIndexMember([]byte(mems[len(mems)-1]))
			page.NextPageToken = base64.RawURLEncoding.EncodeToString(last.cursor)
			break
		}
		ids, mems = append(ids, e.id), append(mems, m)
	}
	return ids, mems, nil
}

// listFiltered reads a context's index whole and keeps the tasks in q's
// state: no index holds exactly those.
func (s *Store) listFiltered(ctx, c context.Context, q tasks.ListQuery, start []byte, upTo string, pageSize int, page *tasks.ListPage) ([]a2a.TaskID, []string, error) {
	members, err := s.rdb.ZRangeByLex(c, s.contextIndexKey(q.Owner, q.ContextID), &redis.ZRangeBy{Min: "-", Max: upTo}).Result()
	if err != nil {
		return nil, nil, s.fail(ctx, err)
	}
	var ids []a2a.TaskID
	var mems []string
	var last []byte
	for _, m := range members {
		e, ok := parseIndexMember([]byte(m))
		if !ok {
			return nil, nil, fmt.Errorf("%w: index member %q", tasks.ErrCorrupt, m)
		}
		if e.state != string(q.State) {
			continue
		}
		page.TotalSize++
		if start != nil && bytes.Compare(e.cursor, start) <= 0 {
			continue
		}
		if len(ids) == pageSize {
			page.NextPageToken = base64.RawURLEncoding.EncodeToString(last)
			continue // keep counting TotalSize
		}
		ids, mems, last = append(ids, e.id), append(mems, m), e.cursor
	}
	return ids, mems, nil
}

// Unfinished implements [tasks.Store]. Tasks come ordered by id, as from the
// embedded store.
func (s *Store) Unfinished(ctx context.Context) ([]*tasks.Snapshot, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("list unfinished tasks: %w", err)
	}
	defer cancel()
	ids, err := s.rdb.SMembers(c, s.unfinishedKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("list unfinished tasks: %w", s.fail(ctx, err))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	sort.Strings(ids)
	tids := make([]a2a.TaskID, len(ids))
	for i, id := range ids {
		tids[i] = a2a.TaskID(id)
	}
	// In batches: one script blocks the server while it runs.
	var reads []taskRead
	for b := range slices.Chunk(tids, 256) {
		r, err := s.readTasks(ctx, c, b, -1, true)
		if err != nil {
			return nil, fmt.Errorf("list unfinished tasks: %w", err)
		}
		reads = append(reads, r...)
	}
	var out []*tasks.Snapshot
	for i, id := range ids {
		snap, err := reads[i].snapshot(a2a.TaskID(id), -1, true)
		if errors.Is(err, tasks.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list unfinished tasks: %w", err)
		}
		out = append(out, snap)
	}
	return out, nil
}

// A push config is stored as three lines: the owner (ownerID), the delivery
// state (a PushDelivery without owner and config) and the config, all JSON,
// which never holds a raw newline. The scripts below can then replace the
// config or the state and compare the owner without decoding JSON in Lua,
// whose encoder would not give the same JSON back.

func encodePushState(d *tasks.PushDelivery) ([]byte, error) {
	st := *d
	st.Owner, st.Config = tasks.Owner{}, nil
	st.Retries = nil // kept in a hash of their own (pushRetryKey)
	return json.Marshal(&st)
}

func decodeRedisPush(v string) (*tasks.PushDelivery, error) {
	owner, rest, ok1 := strings.Cut(v, "\n")
	state, cfg, ok2 := strings.Cut(rest, "\n")
	var d tasks.PushDelivery
	if !ok1 || !ok2 || json.Unmarshal([]byte(state), &d) != nil ||
		json.Unmarshal([]byte(owner), &d.Owner) != nil || json.Unmarshal([]byte(cfg), &d.Config) != nil || d.Config == nil {
		return nil, fmt.Errorf("%w: push config", tasks.ErrCorrupt)
	}
	return &d, nil
}

// putPushScript stores a config, keeping the delivery state of the one it
// replaces if the same owner stored it; a new one starts delivered up to the
// task's current version, read here so no event falls between.
//
// KEYS: task hash, push hash, push task set.
// ARGV: owner, config id, config, task id.
var putPushScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'owner', 'version')
if not cur[1] or cur[1] ~= ARGV[1] then return 1 end
if not tonumber(cur[2]) then return 3 end
local state = '{"delivered":' .. cur[2] .. '}'
local old = redis.call('HGET', KEYS[2], ARGV[2])
if old then
	local o, s = string.match(old, '^([^\n]*)\n([^\n]*)\n')
	if o == ARGV[1] then state = s end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1] .. '\n' .. state .. '\n' .. ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
local ttl = redis.call('PTTL', KEYS[1]) -- a finished task's keys expire together
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 0
`)

// PutPushConfig implements [tasks.Store]. A new config starts delivering with
// the task's next event; replacing one keeps its delivery state.
func (s *Store) PutPushConfig(ctx context.Context, owner tasks.Owner, cfg *a2a.PushConfig) error {
	if cfg == nil {
		return fmt.Errorf("put push config: no config")
	}
	cfg, err := s.sealer.Seal(cfg)
	if err != nil {
		return fmt.Errorf("put push config: %w", err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("put push config of task %s: encode: %w", cfg.TaskID, err)
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("put push config of task %s: %w", cfg.TaskID, err)
	}
	defer cancel()
	keys := []string{s.taskKey(cfg.TaskID), s.pushKey(cfg.TaskID), s.pushTasksKey()}
	code, err := putPushScript.Run(c, s.rdb, keys, ownerID(owner), cfg.ID, b, string(cfg.TaskID)).Int64()
	if err == nil {
		err = scriptErr(code)
	} else {
		err = s.fail(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("put push config of task %s: %w", cfg.TaskID, err)
	}
	return nil
}

// GetPushConfig implements [tasks.Store].
func (s *Store) GetPushConfig(ctx context.Context, owner tasks.Owner, task a2a.TaskID, id string) (*a2a.PushConfig, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, err)
	}
	defer cancel()
	v, err := s.rdb.HGet(c, s.pushKey(task), id).Result()
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, s.fail(ctx, err))
	}
	d, err := decodeRedisPush(v)
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, err)
	}
	if d.Owner != owner {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, tasks.ErrNotFound)
	}
	cfg, err := s.sealer.Open(d.Config)
	if err != nil {
		return nil, fmt.Errorf("get push config %s of task %s: %w", id, task, err)
	}
	return cfg, nil
}

// ListPushConfigs implements [tasks.Store].
func (s *Store) ListPushConfigs(ctx context.Context, owner tasks.Owner, task a2a.TaskID) ([]*a2a.PushConfig, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("list push configs of task %s: %w", task, err)
	}
	defer cancel()
	pipe := s.rdb.Pipeline()
	own := pipe.HGet(c, s.taskKey(task), "owner")
	all := pipe.HGetAll(c, s.pushKey(task))
	if _, err := pipe.Exec(c); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("list push configs of task %s: %w", task, s.fail(ctx, err))
	}
	if own.Err() != nil || own.Val() != ownerID(owner) {
		return nil, fmt.Errorf("list push configs of task %s: %w", task, tasks.ErrNotFound)
	}
	out := []*a2a.PushConfig{}
	for _, v := range all.Val() {
		d, err := decodeRedisPush(v)
		if err != nil {
			return nil, fmt.Errorf("list push configs of task %s: %w", task, err)
		}
		if d.Owner == owner {
			cfg, err := s.sealer.Open(d.Config)
			if err != nil {
				return nil, fmt.Errorf("list push configs of task %s: %w", task, err)
			}
			out = append(out, cfg)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// deletePushScript removes a config if the owner stored it, and the task
// from the push task set with its last config.
//
// KEYS: push hash, push task set, push retry hash. ARGV: config id, owner,
// task id.
var deletePushScript = redis.NewScript(`
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return 1 end
local o = string.match(old, '^([^\n]*)\n')
if not o then return 3 end
if o ~= ARGV[2] then return 1 end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[3]) end
local p = ARGV[1] .. '\n'
for _, f in ipairs(redis.call('HKEYS', KEYS[3])) do
	if string.sub(f, 1, #p) == p and not string.find(f, '\n', #p + 1, true) then redis.call('HDEL', KEYS[3], f) end
end
return 0
`)

// DeletePushConfig implements [tasks.Store].
func (s *Store) DeletePushConfig(ctx context.Context, owner tasks.Owner, task a2a.TaskID, id string) error {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("delete push config %s of task %s: %w", id, task, err)
	}
	defer cancel()
	code, err := deletePushScript.Run(c, s.rdb, []string{s.pushKey(task), s.pushTasksKey(), s.pushRetryKey(task)}, id, ownerID(owner), string(task)).Int64()
	if err == nil {
		err = scriptErr(code)
	} else {
		err = s.fail(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("delete push config %s of task %s: %w", id, task, err)
	}
	return nil
}

// PushDeliveries implements [tasks.Store]. Configs come ordered by task, then id.
func (s *Store) PushDeliveries(ctx context.Context, task a2a.TaskID) ([]*tasks.PushDelivery, error) {
	c, cancel, err := s.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("read push deliveries: %w", err)
	}
	defer cancel()
	ids := []string{string(task)}
	if task == "" {
		if ids, err = s.rdb.SMembers(c, s.pushTasksKey()).Result(); err != nil {
			return nil, fmt.Errorf("read push deliveries: %w", s.fail(ctx, err))
		}
		sort.Strings(ids)
	}
	pipe := s.rdb.Pipeline()
	all := make([]*redis.MapStringStringCmd, len(ids))
	retries := make([]*redis.MapStringStringCmd, len(ids))
	for i, t := range ids {
		all[i] = pipe.HGetAll(c, s.pushKey(a2a.TaskID(t)))
		retries[i] = pipe.HGetAll(c, s.pushRetryKey(a2a.TaskID(t)))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(c); err != nil {
			return nil, fmt.Errorf("read push deliveries: %w", s.fail(ctx, err))
		}
	}
	var out []*tasks.PushDelivery
	for i, cmd := range all {
		first := len(out)
		for _, v := range cmd.Val() {
			d, err := decodeRedisPush(v)
			if err != nil {
				return nil, fmt.Errorf("read push deliveries: %w", err)
			}
			if d.Config, err = s.sealer.Open(d.Config); err != nil {
				return nil, fmt.Errorf("read push deliveries: %w", err)
			}
			out = append(out, d)
		}
		if err := attachRetries(out[first:], retries[i].Val()); err != nil {
			return nil, fmt.Errorf("read push deliveries: %w", err)
		}
		byID := out[first:]
		sort.Slice(byID, func(i, j int) bool { return byID[i].Config.ID < byID[j].Config.ID })
	}
	return out, nil
}

// updatePushScript replaces the delivery state of a config, keeping its
// owner and config: a concurrent replace of the config wins.
//
// KEYS: push hash. ARGV: config id, state.
var updatePushScript = redis.NewScript(`
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return 1 end
local o, c = string.match(old, '^([^\n]*)\n[^\n]*\n(.*)$')
if not o then return 3 end
redis.call('HSET', KEYS[1], ARGV[1], o .. '\n' .. ARGV[2] .. '\n' .. c)
return 0
`)

// UpdatePushDelivery implements [tasks.Store].
func (s *Store) UpdatePushDelivery(ctx context.Context, d *tasks.PushDelivery) error {
	if d == nil || d.Config == nil {
		return fmt.Errorf("update push delivery: no config")
	}
	state, err := encodePushState(d)
	if err != nil {
		return fmt.Errorf("update push delivery %s of task %s: encode: %w", d.Config.ID, d.Config.TaskID, err)
	}
	c, cancel, err := s.start(ctx)
	if err != nil {
		return fmt.Errorf("update push delivery %s of task %s: %w", d.Config.ID, d.Config.TaskID, err)
	}
	defer cancel()
	code, err := updatePushScript.Run(c, s.rdb, []string{s.pushKey(d.Config.TaskID)}, d.Config.ID, state).Int64()
	if err == nil {
		err = scriptErr(code)
	} else {
		err = s.fail(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("update push delivery %s of task %s: %w", d.Config.ID, d.Config.TaskID, err)
	}
	return nil
}
