package acceptance_test

import (
	"context"
	"testing"

	"github.com/handoff-a2a/handoff/acceptance"
)

// TestDecidedObserver: WithDecided hears of each decision, the commit after
// the ledger holds it, with every check; a completion the gate cannot
// decide (an error) is not one.
func TestDecidedObserver(t *testing.T) {
	ledger := openLedger(t)
	type heard struct {
		skill, id string
		d         acceptance.Decision
		inLedger  bool
	}
	var got []heard
	g := newGate(t, ledger, &tools{result: settled()}, acceptance.WithDecided(func(ctx context.Context, skill string, c acceptance.Completion, d acceptance.Decision) {
		_, err := ledger.Get(ctx, c.DelegationID)
		got = append(got, heard{skill, c.DelegationID, d, err == nil})
	}))
	honest := completed(receipt(nil))
	if _, err := g.Decide(t.Context(), "refund", honest); err != nil {
		t.Fatal(err)
	}
	lying := completed(receipt(func(m map[string]any) { m["amount_cents"] = 9999 }))
	lying.DelegationID = "d-2"
	if _, err := g.Decide(t.Context(), "refund", lying); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Decide(t.Context(), "no-such-skill", honest); err == nil {
		t.Fatal("a skill without a contract was decided")
	}
	if len(got) != 2 {
		t.Fatalf("heard %d decisions, want 2: %+v", len(got), got)
	}
	if h := got[0]; h.skill != "refund" || h.id != honest.DelegationID || h.d.Outcome != acceptance.Committed || !h.inLedger || len(h.d.Reasons) == 0 {
		t.Errorf("commit heard as %+v", h)
	}
	if h := got[1]; h.id != "d-2" || h.d.Outcome != acceptance.Rejected || h.inLedger {
		t.Errorf("rejection heard as %+v", h)
	}
}
