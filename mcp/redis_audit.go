package mcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

var _ AuditLog = (*RedisAudit)(nil)

// RedisAudit is an [AuditLog] in Redis, shared by every replica of one agent, so GET
// /a2a/audit on any replica lists the calls all of them made.
//
// Its keys start with "handoff:{namespace}:audit" (the braces are a Cluster hash tag, so the
// append script may touch both): a counter "audit:seq" and a Stream "audit" whose entry IDs
// are 0-<seq>, each entry holding the record's JSON (without its ID, which the entry ID is)
// in field "r". IDs grow with every append from any replica, so "newest first" does not
// depend on replicas' clocks. No key has a TTL: the audit log is a record. A record holds
// digests of arguments and results, never the values, so a redacted field cannot reach
// Redis.
//
// Durability is Redis's: "durable when Append returns" holds with appendonly yes and
// appendfsync always.
type RedisAudit struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedisAudit returns the audit log of namespace on rdb. The caller keeps rdb (the task
// store's client, typically) and closes it; the log never does. namespace must be
// non-empty and hold no braces.
func NewRedisAudit(rdb redis.UniversalClient, namespace string) (*RedisAudit, error) {
	if rdb == nil {
		return nil, errors.New("redis audit log: no client")
	}
	if namespace == "" || strings.ContainsAny(namespace, "{}") {
		return nil, fmt.Errorf("redis audit log: namespace %q: must be non-empty, without braces", namespace)
	}
	return &RedisAudit{rdb: rdb, prefix: "handoff:{" + namespace + "}:"}, nil
}

// Close does nothing: the client belongs to the caller. It is there so both logs close the
// same way.
func (a *RedisAudit) Close() error { return nil }

func (a *RedisAudit) streamKey() string { return a.prefix + "audit" }
func (a *RedisAudit) seqKey() string    { return a.prefix + "audit:seq" }

// appendAuditScript takes the next sequence number and adds the record under it, in one
// step, so no replica's record is ever out of order.
//
// KEYS: counter, stream. ARGV: record JSON.
var appendAuditScript = redis.NewScript(`
local seq = redis.call('INCR', KEYS[1])
redis.call('XADD', KEYS[2], '0-' .. seq, 'r', ARGV[1])
return seq
`)

// Append stores rec under the next sequence number, which becomes its ID.
func (a *RedisAudit) Append(ctx context.Context, rec *AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	raw, err := encodeAuditRecord(rec)
	if err != nil {
		return err
	}
	seq, err := appendAuditScript.Run(ctx, a.rdb, []string{a.seqKey(), a.streamKey()}, raw).Int64()
	if err != nil {
		return fmt.Errorf("append audit record: %w", err)
	}
	rec.ID = strconv.FormatInt(seq, 10)
	return nil
}

// auditPage is how many entries one XREVRANGE reads.
const auditPage = 256

// List scans the records newest first, a page at a time, and decodes each through the
// decoder [BoltAudit] uses, so both refuse the same damaged records.
func (a *RedisAudit) List(ctx context.Context, f AuditFilter) ([]AuditRecord, error) {
	var out []AuditRecord
	end := "+"
	for {
		page, err := a.rdb.XRevRangeN(ctx, a.streamKey(), end, "-", auditPage).Result()
		if err != nil {
			return nil, fmt.Errorf("list audit log: %w", err)
		}
		for _, m := range page {
			seq, err := auditSeq(m.ID)
			if err != nil {
				return nil, fmt.Errorf("list audit log: %w", err)
			}
			raw, _ := m.Values["r"].(string)
			r, err := decodeAuditRecord(binary.BigEndian.AppendUint64(nil, seq), []byte(raw))
			if err != nil {
				return nil, fmt.Errorf("list audit log: %w", err)
			}
			if (f.TaskID != "" && r.TaskID != f.TaskID) || (f.Principal != "" && r.Principal != f.Principal) {
				continue
			}
			out = append(out, r)
			if f.Limit > 0 && len(out) == f.Limit {
				return out, nil
			}
		}
		if len(page) < auditPage {
			return out, nil
		}
		seq, _ := auditSeq(page[len(page)-1].ID) // checked above
		if seq <= 1 {
			return out, nil
		}
		end = "0-" + strconv.FormatUint(seq-1, 10)
	}
}

// auditSeq reads the sequence number of a stream entry ID, which this log writes as 0-<seq>.
func auditSeq(id string) (uint64, error) {
	ms, s, ok := strings.Cut(id, "-")
	seq, err := strconv.ParseUint(s, 10, 64)
	if !ok || ms != "0" || err != nil {
		return 0, fmt.Errorf("audit entry %q: not 0-<sequence>", id)
	}
	return seq, nil
}
