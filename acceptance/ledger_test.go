package acceptance_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
)

func entry(id string) *acceptance.Entry {
	return &acceptance.Entry{
		DelegationID:    id,
		Skill:           "refund",
		ContractVersion: "1",
		EvidenceDigests: map[string]string{"receipt": "ab12"},
		Verifiers:       []acceptance.Check{{Name: "verifier v", Passed: true}},
		CommittedAt:     now,
	}
}

func TestLedgerIdempotent(t *testing.T) {
	ctx := t.Context()
	l := openLedger(t)
	first, err := l.Commit(ctx, entry("d-1"))
	if err != nil {
		t.Fatal(err)
	}
	again := entry("d-1")
	again.ContractVersion, again.CommittedAt = "2", now.Add(time.Hour)
	second, err := l.Commit(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if second.ContractVersion != "1" || !second.CommittedAt.Equal(first.CommittedAt) {
		t.Errorf("second Commit stored %+v, want the first entry %+v", second, first)
	}
	if all, _ := l.List(ctx, 0); len(all) != 1 {
		t.Errorf("%d entries, want 1", len(all))
	}
}

// Racing commits of one delegation, as two gates after a restart might make, leave one entry.
func TestLedgerConcurrentCommit(t *testing.T) {
	ctx := t.Context()
	l := openLedger(t)
	var wg sync.WaitGroup
	stored := make([]*acceptance.Entry, 8)
	for i := range stored {
		wg.Go(func() {
			e := entry("d-1")
			e.ContractVersion = fmt.Sprint(i)
			var err error
			if stored[i], err = l.Commit(ctx, e); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, s := range stored[1:] {
		if s.ContractVersion != stored[0].ContractVersion {
			t.Errorf("commits returned different entries: %q and %q", s.ContractVersion, stored[0].ContractVersion)
		}
	}
	if all, _ := l.List(ctx, 0); len(all) != 1 {
		t.Errorf("%d entries, want 1", len(all))
	}
}

func TestLedgerDurableAcrossReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := acceptance.OpenBoltLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"d-1", "d-2", "d-3"} {
		if _, err := l.Commit(ctx, entry(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = acceptance.OpenBoltLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.Get(ctx, "d-2")
	if err != nil || got.Skill != "refund" || got.EvidenceDigests["receipt"] != "ab12" || !got.CommittedAt.Equal(now) {
		t.Errorf("Get after reopen: %+v, %v", got, err)
	}
	if _, err := l.Commit(ctx, entry("d-4")); err != nil {
		t.Fatal(err)
	}
	list, err := l.List(ctx, 2)
	if err != nil || len(list) != 2 || list[0].DelegationID != "d-4" || list[1].DelegationID != "d-3" {
		t.Errorf("List(2) = %v, %v; want d-4, d-3", ids(list), err)
	}
	if all, _ := l.List(ctx, 0); len(all) != 4 {
		t.Errorf("List(0) = %v, want 4 entries", ids(all))
	}
}

func ids(es []*acceptance.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.DelegationID)
	}
	return out
}

func TestLedgerErrors(t *testing.T) {
	ctx := t.Context()
	l := openLedger(t)
	if _, err := l.Get(ctx, "nobody"); !errors.Is(err, acceptance.ErrNotCommitted) {
		t.Errorf("Get of an unknown delegation: %v, want ErrNotCommitted", err)
	}
	if _, err := l.Commit(ctx, &acceptance.Entry{}); err == nil {
		t.Error("Commit without a delegation id succeeded")
	}
	// The returned entry is a copy: changing it does not change the ledger.
	e, _ := l.Commit(ctx, entry("d-1"))
	e.EvidenceDigests["receipt"] = "tampered"
	if got, _ := l.Get(ctx, "d-1"); got.EvidenceDigests["receipt"] != "ab12" {
		t.Errorf("stored digest %q changed through a returned entry", got.EvidenceDigests["receipt"])
	}
}
