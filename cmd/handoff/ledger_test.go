package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
)

func TestLedger(t *testing.T) {
	dir := t.TempDir()
	l, err := acceptance.OpenBoltLedger(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Commit(context.Background(), &acceptance.Entry{DelegationID: "d-1", Skill: "refund", ContractVersion: "7",
		EvidenceDigests: map[string]string{"receipt": "abcdef0123456789"}, CommittedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"ledger", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"d-1", "refund", "receipt=abcdef012345"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("ledger lacks %q:\n%s", want, out.String())
		}
	}
}
