package mcp_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// TestExplainContextGrants: ExplainContext decides with the caller's grants as a call does
// (another caller's do not count), Explain without them; both name the hooks the call would
// run, guards only when the policy does not deny.
func TestExplainContextGrants(t *testing.T) {
	audit, err := mcp.OpenBoltAudit(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	grant := policy.Grant{ID: "g1", Scope: policy.ScopeResource, Approver: "key:alice", Principal: "key:bob", Tool: "fs__write",
		Resource: "exports", Created: time.Now(), Expires: time.Now().Add(time.Hour)}
	if err := audit.Grants().PutGrant(t.Context(), grant); err != nil {
		t.Fatal(err)
	}
	contracts := []mcp.Contract{{Tool: "fs__write", Effect: mcp.EffectDestructive, Risk: mcp.RiskHigh, Approval: mcp.ApprovalNone,
		Resources: []policy.ResourceSpec{{Pointer: "/path", Kind: policy.KindPath}}}}
	opts := []mcp.PipelineOption{mcp.WithGrants(audit.Grants()), mcp.WithPolicy(policy.Rule{ID: "no-payments", Layer: "resource", Paths: []string{"payments"}}),
		mcp.WithHooks(mcp.Hook{Name: "guard", Point: mcp.HookPreToolCall, Command: "/bin/true"},
			mcp.Hook{Name: "watch", Point: mcp.HookPostToolCall, Command: "/bin/true"})}
	for _, tc := range []struct {
		principal, path string
		rule            string
		hooks           int
	}{
		{"key:bob", "exports/../exports/a", "grant:g1", 2},
		{"key:carol", "exports/a", policy.RuleDefaultAsk, 2},
		{"key:bob", "exports/../payments/a", "no-payments", 1},
	} {
		prop := mcp.Proposal{Principal: tc.principal, Tool: "fs__write", Arguments: map[string]any{"path": tc.path}}
		x, err := mcp.ExplainContext(t.Context(), contracts, prop, opts...)
		if err != nil || x.Rule != tc.rule || len(x.Hooks) != tc.hooks || x.Hooks[len(x.Hooks)-1] != (mcp.ExplainedHook{Name: "watch", Point: mcp.HookPostToolCall}) {
			t.Errorf("%s %s: rule %s, hooks %+v, %v; want %s and %d hooks", tc.principal, tc.path, x.Rule, x.Hooks, err, tc.rule, tc.hooks)
		}
		plain, err := mcp.Explain(contracts, prop, opts...)
		if err != nil || plain.Rule == "grant:g1" {
			t.Errorf("Explain consulted the grants: %s, %v", plain.Rule, err)
		}
	}
}
