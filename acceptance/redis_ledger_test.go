package acceptance_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/redistest"
)

// ledgerStore is what the agent needs of a ledger: the interface, the delegations index and
// Close.
type ledgerStore interface {
	acceptance.Ledger
	Track(ctx context.Context, d *acceptance.Delegation) error
	Delegations(ctx context.Context) ([]*acceptance.Delegation, error)
	Close() error
}

// A ledgerBackend opens one ledger, possibly several times over the same data: each open
// is another process (bbolt, after the last one closed) or another replica (Redis).
type ledgerBackend struct {
	name string
	// place returns an opener of one ledger's data, cleaned up with t.
	place func(t *testing.T) func(t *testing.T) ledgerStore
	// shared says two opens may be used at once, as two replicas do.
	shared bool
}

func ledgerBackends() []ledgerBackend {
	return []ledgerBackend{
		{name: "bolt", place: func(t *testing.T) func(t *testing.T) ledgerStore {
			path := filepath.Join(t.TempDir(), "ledger.db")
			return func(t *testing.T) ledgerStore {
				l, err := acceptance.OpenBoltLedger(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				return l
			}
		}},
		{name: "redis", shared: true, place: func(t *testing.T) func(t *testing.T) ledgerStore {
			ns := redistest.Namespace(t, "ledgertest-")
			return func(t *testing.T) ledgerStore {
				rdb := redistest.Client(t)
				l, err := acceptance.NewRedisLedger(rdb, ns)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
		}},
	}
}

// TestLedgerSuite runs one suite on both ledgers: idempotent commits (across replicas on
// Redis), order, the returned copies, errors and the delegations index.
func TestLedgerSuite(t *testing.T) {
	for _, b := range ledgerBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Run("idempotent", func(t *testing.T) { testIdempotent(t, b.place(t)) })
			t.Run("concurrent", func(t *testing.T) { testConcurrent(t, b) })
			t.Run("reopen", func(t *testing.T) { testReopen(t, b.place(t)) })
			t.Run("errors", func(t *testing.T) { testErrors(t, b.place(t)) })
			t.Run("delegations", func(t *testing.T) { testDelegations(t, b.place(t)) })
		})
	}
}

func testIdempotent(t *testing.T, open func(*testing.T) ledgerStore) {
	ctx := t.Context()
	l := open(t)
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
	if all, err := l.List(ctx, 0); err != nil || len(all) != 1 {
		t.Errorf("List: %v, %v; want 1 entry", ids(all), err)
	}
}

// Racing commits of one delegation leave one entry; on Redis they race from two replicas.
func testConcurrent(t *testing.T, b ledgerBackend) {
	ctx := t.Context()
	open := b.place(t)
	ls := []ledgerStore{open(t)}
	if b.shared {
		ls = append(ls, open(t))
	}
	var wg sync.WaitGroup
	stored := make([]*acceptance.Entry, 16)
	for i := range stored {
		wg.Go(func() {
			e := entry("d-1")
			e.ContractVersion = fmt.Sprint(i)
			var err error
			if stored[i], err = ls[i%len(ls)].Commit(ctx, e); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, s := range stored[1:] {
		if s.ContractVersion != stored[0].ContractVersion {
			t.Errorf("commits returned different entries: %q and %q", s.ContractVersion, stored[0].ContractVersion)
		}
	}
	for _, l := range ls {
		if all, err := l.List(ctx, 0); err != nil || len(all) != 1 {
			t.Errorf("List: %v, %v; want 1 entry", ids(all), err)
		}
	}
}

func testReopen(t *testing.T, open func(*testing.T) ledgerStore) {
	ctx := t.Context()
	l := open(t)
	for _, id := range []string{"d-1", "d-2", "d-3"} {
		if _, err := l.Commit(ctx, entry(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t)
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
	all, err := l.List(ctx, 0)
	if want := []string{"d-4", "d-3", "d-2", "d-1"}; err != nil || fmt.Sprint(ids(all)) != fmt.Sprint(want) {
		t.Errorf("List(0) = %v, %v; want %v", ids(all), err, want)
	}
}

func testErrors(t *testing.T, open func(*testing.T) ledgerStore) {
	ctx := t.Context()
	l := open(t)
	if _, err := l.Get(ctx, "nobody"); !errors.Is(err, acceptance.ErrNotCommitted) {
		t.Errorf("Get of an unknown delegation: %v, want ErrNotCommitted", err)
	}
	if _, err := l.Commit(ctx, &acceptance.Entry{}); err == nil {
		t.Error("Commit without a delegation id succeeded")
	}
	// The returned entry is a copy: changing it does not change the ledger.
	e, err := l.Commit(ctx, entry("d-1"))
	if err != nil {
		t.Fatal(err)
	}
	e.EvidenceDigests["receipt"] = "tampered"
	if got, err := l.Get(ctx, "d-1"); err != nil || got.EvidenceDigests["receipt"] != "ab12" {
		t.Errorf("stored entry %+v, %v changed through a returned entry", got, err)
	}
}

// A delegation's record is replaced as it progresses, survives a reopen, and lists most
// recently updated first; tracking writes no ledger entry.
func testDelegations(t *testing.T, open func(*testing.T) ledgerStore) {
	l := open(t)
	at := time.Now().UTC()
	for _, d := range []*acceptance.Delegation{
		{TaskID: "t1", Skill: "s", Peer: "p", Updated: at},
		{TaskID: "t2", Skill: "s", Peer: "p", RemoteTaskID: "r2", Updated: at.Add(time.Second)},
		{TaskID: "t1", Skill: "s", Peer: "p", RemoteTaskID: "r1", RemoteState: a2a.TaskStateCompleted, Outcome: "committed", Updated: at.Add(2 * time.Second)},
	} {
		if err := l.Track(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Track(t.Context(), &acceptance.Delegation{}); err == nil {
		t.Fatal("a delegation without a task id was tracked")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t)
	got, err := l.Delegations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].TaskID != "t1" || got[0].RemoteTaskID != "r1" || got[0].Outcome != "committed" || got[1].TaskID != "t2" {
		t.Fatalf("delegations: %+v", got)
	}
	if entries, err := l.List(t.Context(), 0); err != nil || len(entries) != 0 {
		t.Fatalf("tracking wrote ledger entries: %v %v", entries, err)
	}
}

// TestRedisLedgerRefuses: a bad namespace or no client is refused before anything is
// written, and a damaged entry is an error, not a zero entry.
func TestRedisLedgerRefuses(t *testing.T) {
	rdb := redistest.Client(t)
	for _, ns := range []string{"", "a{b", "a}b"} {
		if _, err := acceptance.NewRedisLedger(rdb, ns); err == nil {
			t.Errorf("namespace %q accepted", ns)
		}
	}
	if _, err := acceptance.NewRedisLedger(nil, "x"); err == nil {
		t.Error("a nil client accepted")
	}
	ns := redistest.Namespace(t, "ledgertest-")
	l, err := acceptance.NewRedisLedger(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(t.Context(), "handoff:{"+ns+"}:ledger:entries", "d-1", "{").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(t.Context(), "d-1"); err == nil {
		t.Error("a damaged entry was read without an error")
	}
	if _, err := l.Commit(t.Context(), entry("d-1")); err == nil {
		t.Error("a commit over a damaged entry returned no error")
	}
}
