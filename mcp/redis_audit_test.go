package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/mcp"
)

// auditStore is what the agent needs of an audit log.
type auditStore interface {
	mcp.AuditLog
	Close() error
}

// An auditBackend opens one log, possibly several times over the same data: each open is
// another process (bbolt, after the last one closed) or another replica (Redis).
type auditBackend struct {
	name string
	// place returns an opener of one log's data, cleaned up with t.
	place func(t *testing.T) func(t *testing.T) auditStore
	// shared says two opens may be used at once, as two replicas do.
	shared bool
}

func auditBackends() []auditBackend {
	return []auditBackend{
		{name: "bolt", place: func(t *testing.T) func(t *testing.T) auditStore {
			path := filepath.Join(t.TempDir(), "audit.db")
			return func(t *testing.T) auditStore {
				a, err := mcp.OpenBoltAudit(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				return a
			}
		}},
		{name: "redis", shared: true, place: func(t *testing.T) func(t *testing.T) auditStore {
			ns := redistest.Namespace(t, "audittest-")
			return func(t *testing.T) auditStore {
				a, err := mcp.NewRedisAudit(redistest.Client(t), ns)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
		}},
	}
}

// TestAuditSuite runs one suite on both audit logs: IDs, order, filters, reopening, and
// concurrent appends (from two replicas on Redis).
func TestAuditSuite(t *testing.T) {
	for _, b := range auditBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("list", func(t *testing.T) { testAuditList(t, b.place(t)) })
			t.Run("concurrent", func(t *testing.T) { testAuditConcurrent(t, b) })
		})
	}
}

func testAuditList(t *testing.T, open func(*testing.T) auditStore) {
	a := open(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []mcp.AuditRecord{
		{Time: at, TaskID: "t1", Principal: "bob", Tool: "ex__read_note", ArgsDigest: "d1", Decision: mcp.DecisionAllow, Outcome: mcp.OutcomeSuccess, ResultSHA256: "r1", Duration: time.Second},
		{TaskID: "t1", Principal: "bob", Tool: "ex__write_note", Decision: mcp.DecisionAsk, Outcome: mcp.OutcomeApprovalRequired, Reason: "needs an approval"},
		{TaskID: "t2", Principal: "carol", Tool: "ex__write_note", Decision: mcp.DecisionAsk, Approver: "alice", Outcome: mcp.OutcomeSuccess, IdempotencyKey: "k1"},
		{TaskID: "t1", Principal: "carol", Tool: "ex__nope", Outcome: mcp.OutcomeUnavailableTool},
	}
	var ids []string
	for i := range in {
		if err := a.Append(t.Context(), &in[i]); err != nil {
			t.Fatal(err)
		}
		if in[i].ID == "" || slices.Contains(ids, in[i].ID) || in[i].Time.IsZero() {
			t.Fatalf("record %d after Append: %+v", i, in[i])
		}
		ids = append(ids, in[i].ID)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := a.Append(cancelled, &mcp.AuditRecord{TaskID: "t9", Outcome: mcp.OutcomeSuccess}); err == nil {
		t.Fatal("Append with a cancelled context stored a record")
	}
	check := func(t *testing.T, a auditStore) {
		for _, tc := range []struct {
			name string
			f    mcp.AuditFilter
			want []int // indexes into in, newest first
		}{
			{"all", mcp.AuditFilter{}, []int{3, 2, 1, 0}},
			{"task", mcp.AuditFilter{TaskID: "t1"}, []int{3, 1, 0}},
			{"principal", mcp.AuditFilter{Principal: "carol"}, []int{3, 2}},
			{"task and principal", mcp.AuditFilter{TaskID: "t1", Principal: "bob"}, []int{1, 0}},
			{"limit", mcp.AuditFilter{TaskID: "t1", Limit: 2}, []int{3, 1}},
			{"nothing", mcp.AuditFilter{TaskID: "t3"}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, err := a.List(t.Context(), tc.f)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tc.want) {
					t.Fatalf("%d records, want %d: %+v", len(got), len(tc.want), got)
				}
				for i, j := range tc.want {
					w := in[j]
					if !got[i].Time.Equal(w.Time) {
						t.Fatalf("record %d time %v, want %v", i, got[i].Time, w.Time)
					}
					got[i].Time = w.Time
					if !reflect.DeepEqual(got[i], w) {
						t.Fatalf("record %d: %+v, want %+v", i, got[i], w)
					}
				}
			})
		}
	}
	t.Run("open", func(t *testing.T) { check(t, a) })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := open(t)
	t.Run("reopened", func(t *testing.T) { check(t, b) })
	next := mcp.AuditRecord{TaskID: "t1", Outcome: mcp.OutcomeSuccess}
	if err := b.Append(t.Context(), &next); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, next.ID) {
		t.Fatalf("id %s reused after reopen", next.ID)
	}
}

// Concurrent appends (more than one List page of them) each get their own ID, and every
// one is listed, newest first, by every replica.
func testAuditConcurrent(t *testing.T, b auditBackend) {
	open := b.place(t)
	logs := []auditStore{open(t)}
	if b.shared {
		logs = append(logs, open(t))
	}
	const n = 600
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := range n {
		wg.Go(func() {
			rec := &mcp.AuditRecord{TaskID: fmt.Sprint("t", i), Tool: "ex__read_note", Outcome: mcp.OutcomeSuccess}
			if err := logs[i%len(logs)].Append(t.Context(), rec); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if rec.ID == "" || seen[rec.ID] {
				t.Errorf("id %q empty or given twice", rec.ID)
			}
			seen[rec.ID] = true
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, l := range logs {
		got, err := l.List(t.Context(), mcp.AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("listed %d records, want %d", len(got), n)
		}
		for i, r := range got {
			if !seen[r.ID] {
				t.Errorf("listed record %q was never returned by Append", r.ID)
			}
			if i > 0 && !lessID(r.ID, got[i-1].ID) {
				t.Fatalf("record %s listed after %s: not newest first", r.ID, got[i-1].ID)
			}
		}
		if one, err := l.List(t.Context(), mcp.AuditFilter{TaskID: "t7"}); err != nil || len(one) != 1 {
			t.Fatalf("List of task t7: %+v, %v", one, err)
		}
	}
}

func lessID(a, b string) bool { return len(a) < len(b) || (len(a) == len(b) && a < b) }

// TestRedisAuditRefuses: a bad namespace or no client is refused, and a damaged record is
// refused by List, as the embedded log refuses one.
func TestRedisAuditRefuses(t *testing.T) {
	rdb := redistest.Client(t)
	for _, ns := range []string{"", "a{b", "a}b"} {
		if _, err := mcp.NewRedisAudit(rdb, ns); err == nil {
			t.Errorf("namespace %q accepted", ns)
		}
	}
	if _, err := mcp.NewRedisAudit(nil, "x"); err == nil {
		t.Error("a nil client accepted")
	}
	for _, damage := range []struct{ id, value string }{
		{"0-1", "{"},
		{"0-1", `{"outcome":"exploded"}`},
		{"5-1", `{"outcome":"success"}`},
	} {
		ns := redistest.Namespace(t, "audittest-")
		a, err := mcp.NewRedisAudit(rdb, ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.XAdd(t.Context(), &redis.XAddArgs{Stream: "handoff:{" + ns + "}:audit", ID: damage.id, Values: []string{"r", damage.value}}).Err(); err != nil {
			t.Fatal(err)
		}
		if got, err := a.List(t.Context(), mcp.AuditFilter{}); err == nil {
			t.Errorf("entry %s %s listed as %+v", damage.id, damage.value, got)
		}
	}
}

// TestRedisAuditRedaction: a redacted argument, and the arguments at all, never reach the
// records in Redis, while the call runs and is audited.
func TestRedisAuditRedaction(t *testing.T) {
	m := exampleManager(t)
	ns := redistest.Namespace(t, "audittest-")
	rdb := redistest.Client(t)
	audit, err := mcp.NewRedisAudit(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcp.NewPipeline(m, []mcp.Contract{{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskHigh,
		Approval: mcp.ApprovalMandatory, Redact: []string{"text"}}}, audit, mcp.WithApprovers(approvers("alice")))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{m: m, p: p}
	prop := mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "diary", "text": "TOPSECRET-1"}}
	r := h.run(t, prop, nil)
	wantOutcome(t, r, mcp.OutcomeApprovalRequired)
	a := &mcp.Approval{Approver: "alice", Tool: r.Approval.Tool, SnapshotVersion: r.Approval.SnapshotVersion, Digest: r.Approval.Digest, Token: r.Approval.Token}
	wantOutcome(t, h.run(t, prop, a), mcp.OutcomeSuccess)
	wantOutcome(t, h.run(t, mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "diary", "text": []any{"TOPSECRET-2"}}}, nil), mcp.OutcomeValidationFailed)

	raw, err := rdb.XRange(t.Context(), "handoff:{"+ns+"}:audit", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 3 {
		t.Fatalf("%d records in Redis, want 3", len(raw))
	}
	for _, e := range raw {
		v := fmt.Sprint(e.Values)
		for _, s := range []string{"TOPSECRET", "diary"} {
			if strings.Contains(v, s) {
				t.Errorf("record %s holds %q: %s", e.ID, s, v)
			}
		}
	}
}
