package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// pruner is what retention needs of an audit log and a grant store.
type pruner interface {
	Prune(ctx context.Context, before time.Time) (int, error)
}

type grantPruner interface {
	PruneExpired(ctx context.Context, before time.Time) (int, error)
}

// TestAuditPrune: on both stores, records older than the cutoff go, newer
// ones stay and keep their ids; grants that expired before it go, open-ended
// and later ones stay.
func TestAuditPrune(t *testing.T) {
	for name, open := range grantBackends() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			a, g := open(t)
			base := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
			for i := range 5 {
				if err := a.Append(ctx, &mcp.AuditRecord{Time: base.Add(time.Duration(i) * time.Hour), TaskID: "t", Tool: "s__t", Outcome: mcp.OutcomeSuccess}); err != nil {
					t.Fatal(err)
				}
			}
			n, err := a.(pruner).Prune(ctx, base.Add(150*time.Minute))
			if err != nil || n != 3 {
				t.Fatalf("prune = %d, %v; want the 3 records before 2h30", n, err)
			}
			left, err := a.List(ctx, mcp.AuditFilter{})
			if err != nil || len(left) != 2 || left[0].ID != "5" || left[1].ID != "4" {
				t.Fatalf("left = %+v, %v; want records 5 and 4", left, err)
			}
			if n, err := a.(pruner).Prune(ctx, base.Add(10*time.Hour)); err != nil || n != 2 {
				t.Errorf("prune all = %d, %v; want 2", n, err)
			}
			if left, _ := a.List(ctx, mcp.AuditFilter{}); len(left) != 0 {
				t.Errorf("%d records left after pruning all", len(left))
			}
			for _, gr := range []policy.Grant{
				{ID: "old", Scope: policy.ScopeResource, Approver: "key:a", Principal: "key:b", Tool: "fs__*", Resource: "tmp", Created: base, Expires: base.Add(time.Hour)},
				{ID: "new", Scope: policy.ScopeResource, Approver: "key:a", Principal: "key:b", Tool: "fs__*", Resource: "tmp", Created: base, Expires: base.Add(5 * time.Hour)},
				{ID: "always", Scope: policy.ScopeTask, TaskID: "t1", Approver: "key:a", Principal: "key:b", Tool: "fs__read", Created: base},
			} {
				if err := g.PutGrant(ctx, gr); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := g.(grantPruner).PruneExpired(ctx, base.Add(2*time.Hour)); err != nil || n != 1 {
				t.Fatalf("prune grants = %d, %v; want the one expired", n, err)
			}
			gs, err := g.Grants(ctx, mcp.GrantFilter{})
			if err != nil || len(gs) != 2 {
				t.Fatalf("grants left = %+v, %v", gs, err)
			}
		})
	}
}
