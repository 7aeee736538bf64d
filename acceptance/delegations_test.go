package acceptance_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
)

// TestTrackDelegations: a delegation's record is replaced as it progresses,
// survives a reopen, and lists most recently updated first.
func TestTrackDelegations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := acceptance.OpenBoltLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, d := range []*acceptance.Delegation{
		{TaskID: "t1", Skill: "s", Peer: "p", Updated: now},
		{TaskID: "t2", Skill: "s", Peer: "p", RemoteTaskID: "r2", Updated: now.Add(time.Second)},
		{TaskID: "t1", Skill: "s", Peer: "p", RemoteTaskID: "r1", RemoteState: a2a.TaskStateCompleted, Outcome: "committed", Updated: now.Add(2 * time.Second)},
	} {
		if err := l.Track(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Track(t.Context(), &acceptance.Delegation{}); err == nil {
		t.Fatal("a delegation without a task id was tracked")
	}
	l.Close()
	if l, err = acceptance.OpenBoltLedger(path); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
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
