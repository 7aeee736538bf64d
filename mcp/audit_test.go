package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
)

// TestBoltAudit: records get ids, come back newest first and filtered, and survive a reopen.
func TestBoltAudit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	a, err := mcp.OpenBoltAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := []mcp.AuditRecord{
		{Time: at, TaskID: "t1", Principal: "bob", Tool: "ex__read_note", ArgsDigest: "d1", Decision: mcp.DecisionAllow, Outcome: mcp.OutcomeSuccess, ResultSHA256: "r1", Duration: time.Second},
		{TaskID: "t1", Principal: "bob", Tool: "ex__write_note", Decision: mcp.DecisionAsk, Outcome: mcp.OutcomeApprovalRequired, Reason: "needs an approval"},
		{TaskID: "t2", Principal: "carol", Tool: "ex__write_note", Decision: mcp.DecisionAsk, Approver: "alice", Outcome: mcp.OutcomeSuccess},
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
	if err := a.Append(cancelled, &mcp.AuditRecord{TaskID: "t9"}); err == nil {
		t.Fatal("Append with a cancelled context stored a record")
	}

	check := func(t *testing.T, a *mcp.BoltAudit) {
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
					if got[i] != w {
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
	b, err := mcp.OpenBoltAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	t.Run("reopened", func(t *testing.T) { check(t, b) })
	next := mcp.AuditRecord{TaskID: "t1"}
	if err := b.Append(t.Context(), &next); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, next.ID) {
		t.Fatalf("id %s reused after reopen", next.ID)
	}
}

// TestBoltAuditConcurrent: concurrent appends share commits, every one gets its own ID and is
// listed, and Close commits what was queued.
func TestBoltAuditConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	a, err := mcp.OpenBoltAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	ids := make(chan string, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			rec := &mcp.AuditRecord{TaskID: fmt.Sprint("t", i), Tool: "ex__read_note", Outcome: mcp.OutcomeSuccess}
			err := a.Append(t.Context(), rec)
			errs <- err
			ids <- rec.ID
		}()
	}
	seen := map[string]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		id := <-ids
		if id == "" || seen[id] {
			t.Fatalf("id %q empty or given twice", id)
		}
		seen[id] = true
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(t.Context(), &mcp.AuditRecord{Outcome: mcp.OutcomeSuccess}); !errors.Is(err, mcp.ErrAuditClosed) {
		t.Fatalf("Append after Close: %v, want ErrAuditClosed", err)
	}
	b, err := mcp.OpenBoltAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.List(t.Context(), mcp.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("listed %d records after reopening, want %d", len(got), n)
	}
	for _, r := range got {
		if !seen[r.ID] {
			t.Errorf("listed record %q was never returned by Append", r.ID)
		}
	}
}
