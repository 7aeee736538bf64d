package mcp_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
)

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
