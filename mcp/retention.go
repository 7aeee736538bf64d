package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pruneBatch bounds the records one transaction of a prune deletes, so an
// append waits for a short one at most.
const pruneBatch = 1000

// recordTime reads the time of a stored audit record.
func recordTime(raw []byte) (time.Time, error) {
	var r struct {
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return time.Time{}, fmt.Errorf("audit record: %w", err)
	}
	return r.Time, nil
}

// Prune deletes the oldest records, those whose Time is before before, in
// order, up to the first that is not (records are appended in time order,
// so a later one out of order is kept a little longer), and returns how
// many it deleted.
func (a *BoltAudit) Prune(ctx context.Context, before time.Time) (int, error) {
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		deleted, more := 0, false
		err := a.db.Update(func(tx *bolt.Tx) error {
			deleted, more = 0, false
			b := tx.Bucket(auditBucket)
			var keys [][]byte
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if len(keys) == pruneBatch {
					more = true
					break
				}
				t, err := recordTime(v)
				if err != nil {
					return err
				}
				if !t.Before(before) {
					break
				}
				keys = append(keys, bytes.Clone(k))
			}
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			deleted = len(keys)
			return nil
		})
		n += deleted
		if err != nil {
			return n, fmt.Errorf("prune audit log: %w", err)
		}
		if !more {
			return n, nil
		}
	}
}

// PruneExpired deletes the grants that expired before before and returns
// how many; a grant without an expiry is kept.
func (s *BoltGrants) PruneExpired(ctx context.Context, before time.Time) (int, error) {
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		n = 0
		b := tx.Bucket(grantBucket)
		if b == nil {
			return nil
		}
		var ids [][]byte
		if err := b.ForEach(func(k, v []byte) error {
			g, err := decodeGrant(string(k), v)
			if err != nil {
				return err
			}
			if !g.Expires.IsZero() && g.Expires.Before(before) {
				ids = append(ids, bytes.Clone(k))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range ids {
			if err := b.Delete(id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune grants: %w", err)
	}
	return n, nil
}

// Prune is [BoltAudit.Prune] on Redis: it finds the first record not
// before before, a page at a time from the oldest, and trims the stream
// below it.
func (a *RedisAudit) Prune(ctx context.Context, before time.Time) (int, error) {
	start := "-"
	for {
		page, err := a.rdb.XRangeN(ctx, a.streamKey(), start, "+", auditPage).Result()
		if err != nil {
			return 0, fmt.Errorf("prune audit log: %w", err)
		}
		for _, m := range page {
			raw, _ := m.Values["r"].(string)
			t, err := recordTime([]byte(raw))
			if err != nil {
				return 0, fmt.Errorf("prune audit log: %w", err)
			}
			if !t.Before(before) {
				return a.trim(ctx, m.ID)
			}
		}
		if len(page) < auditPage {
			if len(page) == 0 {
				return 0, nil
			}
			// Every record is old: trim below the one after the last.
			_, seq, _ := strings.Cut(page[len(page)-1].ID, "-")
			n, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("prune audit log: record id %s", page[len(page)-1].ID)
			}
			return a.trim(ctx, "0-"+strconv.FormatUint(n+1, 10))
		}
		start = "(" + page[len(page)-1].ID
	}
}

// trim deletes the records with an id below minID.
func (a *RedisAudit) trim(ctx context.Context, minID string) (int, error) {
	n, err := a.rdb.XTrimMinID(ctx, a.streamKey(), minID).Result()
	if err != nil {
		return 0, fmt.Errorf("prune audit log: %w", err)
	}
	return int(n), nil
}

// PruneExpired is [BoltGrants.PruneExpired] on Redis.
func (s *RedisGrants) PruneExpired(ctx context.Context, before time.Time) (int, error) {
	all, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return 0, fmt.Errorf("prune grants: %w", err)
	}
	var ids []string
	for id, raw := range all {
		g, err := decodeGrant(id, []byte(raw))
		if err != nil {
			return 0, fmt.Errorf("prune grants: %w", err)
		}
		if !g.Expires.IsZero() && g.Expires.Before(before) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if err := s.rdb.HDel(ctx, s.key, ids...).Err(); err != nil {
		return 0, fmt.Errorf("prune grants: %w", err)
	}
	return len(ids), nil
}
