package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// GrantFilter selects grants; empty fields match everything.
type GrantFilter struct {
	// Principal selects the grants for that caller.
	Principal string
	// TaskID, when set, selects the grants that may cover a call of that task: its task
	// grants and every scope grant.
	TaskID string
}

func (f GrantFilter) match(g policy.Grant) bool {
	if f.Principal != "" && g.Principal != f.Principal {
		return false
	}
	return f.TaskID == "" || g.Scope != policy.ScopeTask || g.TaskID == f.TaskID
}

// GrantStore keeps the grants approvers gave ([policy.Grant]). Implementations are safe for
// concurrent use; [BoltGrants] and [RedisGrants] are the two, beside the two audit logs.
type GrantStore interface {
	// PutGrant stores g, replacing a grant with its ID.
	PutGrant(ctx context.Context, g policy.Grant) error
	// Grants returns the grants f selects, oldest first; expired ones included.
	Grants(ctx context.Context, f GrantFilter) ([]policy.Grant, error)
	// RevokeGrant deletes the grant; [ErrGrantNotFound] if there is none with that id.
	RevokeGrant(ctx context.Context, id string) error
}

var (
	_ GrantStore = (*BoltGrants)(nil)
	_ GrantStore = (*RedisGrants)(nil)
)

// NewGrantID returns a fresh random grant id.
func NewGrantID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func encodeGrant(g policy.Grant) ([]byte, error) {
	if g.ID == "" {
		return nil, errors.New("store grant: no id")
	}
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("store grant %s: %w", g.ID, err)
	}
	return json.Marshal(g)
}

func decodeGrant(id string, raw []byte) (policy.Grant, error) {
	var g policy.Grant
	if err := json.Unmarshal(raw, &g); err != nil {
		return g, fmt.Errorf("grant %s: %w", id, err)
	}
	if g.ID != id {
		return g, fmt.Errorf("grant %s: stored under another id (%s)", id, g.ID)
	}
	if err := g.Check(); err != nil { // damaged, or written by something else
		return g, fmt.Errorf("grant %s: %w", id, err)
	}
	return g, nil
}

func sortGrants(gs []policy.Grant) {
	slices.SortStableFunc(gs, func(a, b policy.Grant) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

var grantBucket = []byte("grants")

// BoltGrants is a [GrantStore] in a [BoltAudit]'s file (its bucket "grants"), so the
// embedded store keeps grants where it keeps the audit log. Get one with
// [BoltAudit.Grants]; it closes with the audit log.
type BoltGrants struct{ db *bolt.DB }

// Grants returns the grant store that shares the audit log's file.
func (a *BoltAudit) Grants() *BoltGrants { return &BoltGrants{db: a.db} }

// PutGrant stores g, durably when it returns.
func (s *BoltGrants) PutGrant(ctx context.Context, g policy.Grant) error {
	raw, err := encodeGrant(g)
	if err != nil {
		return err
	}
	if err := s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(grantBucket)
		if err != nil {
			return err
		}
		return b.Put([]byte(g.ID), raw)
	}); err != nil {
		return fmt.Errorf("store grant %s: %w", g.ID, err)
	}
	return nil
}

// Grants scans every grant; an agent holds few.
func (s *BoltGrants) Grants(ctx context.Context, f GrantFilter) ([]policy.Grant, error) {
	var out []policy.Grant
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(grantBucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			g, err := decodeGrant(string(k), v)
			if err != nil {
				return err
			}
			if f.match(g) {
				out = append(out, g)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	sortGrants(out)
	return out, nil
}

// RevokeGrant deletes the grant with id.
func (s *BoltGrants) RevokeGrant(ctx context.Context, id string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(grantBucket)
		if b == nil || b.Get([]byte(id)) == nil {
			return ErrGrantNotFound
		}
		return b.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("revoke grant %s: %w", id, err)
	}
	return nil
}

// RedisGrants is a [GrantStore] in Redis, shared by the replicas: one hash
// "handoff:{namespace}:grants", field the grant id, value its JSON. No key has a TTL; an
// expired grant covers nothing and stays listed until it is revoked.
type RedisGrants struct {
	rdb redis.UniversalClient
	key string
}

// NewRedisGrants returns the grant store of namespace on rdb, which the caller keeps and
// closes. namespace must be non-empty and hold no braces.
func NewRedisGrants(rdb redis.UniversalClient, namespace string) (*RedisGrants, error) {
	if rdb == nil {
		return nil, errors.New("redis grants: no client")
	}
	if namespace == "" || strings.ContainsAny(namespace, "{}") {
		return nil, fmt.Errorf("redis grants: namespace %q: must be non-empty, without braces", namespace)
	}
	return &RedisGrants{rdb: rdb, key: "handoff:{" + namespace + "}:grants"}, nil
}

// PutGrant stores g.
func (s *RedisGrants) PutGrant(ctx context.Context, g policy.Grant) error {
	raw, err := encodeGrant(g)
	if err != nil {
		return err
	}
	if err := s.rdb.HSet(ctx, s.key, g.ID, raw).Err(); err != nil {
		return fmt.Errorf("store grant %s: %w", g.ID, err)
	}
	return nil
}

// Grants reads the whole hash; an agent holds few.
func (s *RedisGrants) Grants(ctx context.Context, f GrantFilter) ([]policy.Grant, error) {
	all, err := s.rdb.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	var out []policy.Grant
	for id, raw := range all {
		g, err := decodeGrant(id, []byte(raw))
		if err != nil {
			return nil, fmt.Errorf("list grants: %w", err)
		}
		if f.match(g) {
			out = append(out, g)
		}
	}
	sortGrants(out)
	return out, nil
}

// RevokeGrant deletes the grant with id.
func (s *RedisGrants) RevokeGrant(ctx context.Context, id string) error {
	n, err := s.rdb.HDel(ctx, s.key, id).Result()
	if err != nil {
		return fmt.Errorf("revoke grant %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("revoke grant %s: %w", id, ErrGrantNotFound)
	}
	return nil
}

// grantTimeout bounds reading the grants of one call: a slow store must not hold the call.
const grantTimeout = 2 * time.Second
