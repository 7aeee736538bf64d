package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
)

// TestAuditJSONLines: "audit --json" prints one record a line, as every
// --json does, and --task keeps one task's calls.
func TestAuditJSONLines(t *testing.T) {
	dir := t.TempDir()
	log, err := mcp.OpenBoltAudit(filepath.Join(dir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []string{"t-1", "t-2"} {
		if err := log.Append(context.Background(), &mcp.AuditRecord{ID: "call-" + task, Time: time.Now(), TaskID: task, Tool: "orders__get", Outcome: mcp.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if got := decodeLines[mcp.AuditRecord](t, mustRun(t, "audit", "--data-dir", dir, "--json")); len(got) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(got), got)
	}
	if got := decodeLines[mcp.AuditRecord](t, mustRun(t, "audit", "--data-dir", dir, "--task", "t-2", "--json")); len(got) != 1 || got[0].TaskID != "t-2" {
		t.Fatalf("--task t-2: %+v", got)
	}
}
