package mcp_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// grantBackends are the two grant stores, each beside its audit log.
func grantBackends() map[string]func(t *testing.T) (mcp.AuditLog, mcp.GrantStore) {
	return map[string]func(t *testing.T) (mcp.AuditLog, mcp.GrantStore){
		"bolt": func(t *testing.T) (mcp.AuditLog, mcp.GrantStore) {
			a, err := mcp.OpenBoltAudit(filepath.Join(t.TempDir(), "audit.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			return a, a.Grants()
		},
		"redis": func(t *testing.T) (mcp.AuditLog, mcp.GrantStore) {
			ns := redistest.Namespace(t, "grantstest-")
			a, err := mcp.NewRedisAudit(redistest.Client(t), ns)
			if err != nil {
				t.Fatal(err)
			}
			g, err := mcp.NewRedisGrants(redistest.Client(t), ns)
			if err != nil {
				t.Fatal(err)
			}
			return a, g
		},
	}
}

// TestGrantStores: both stores keep, filter, list oldest first and revoke grants, and refuse
// one that does not check.
func TestGrantStores(t *testing.T) {
	for name, open := range grantBackends() {
		t.Run(name, func(t *testing.T) {
			_, s := open(t)
			now := time.Now().UTC().Truncate(time.Millisecond)
			in := []policy.Grant{
				{ID: "g1", Scope: policy.ScopeTask, Approver: "key:alice", Principal: "key:bob", TaskID: "t1", Tool: "fs__write", Created: now},
				{ID: "g2", Scope: policy.ScopeTask, Approver: "key:alice", Principal: "key:bob", TaskID: "t2", Tool: "fs__write", Created: now.Add(time.Second)},
				{ID: "g3", Scope: policy.ScopeResource, Approver: "key:alice", Principal: "key:bob", Tool: "fs__*", Resource: "tmp", Created: now.Add(2 * time.Second), Expires: now.Add(time.Hour)},
				{ID: "g4", Scope: policy.ScopeTask, Approver: "key:alice", Principal: "key:carol", TaskID: "t1", Tool: "fs__write", Created: now.Add(3 * time.Second)},
			}
			for _, g := range in {
				if err := s.PutGrant(t.Context(), g); err != nil {
					t.Fatal(err)
				}
			}
			ids := func(f mcp.GrantFilter) string {
				gs, err := s.Grants(t.Context(), f)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, g := range gs {
					out = append(out, g.ID)
				}
				return strings.Join(out, ",")
			}
			for f, want := range map[mcp.GrantFilter]string{
				{}:                                   "g1,g2,g3,g4",
				{Principal: "key:bob"}:               "g1,g2,g3",
				{Principal: "key:bob", TaskID: "t1"}: "g1,g3",
				{TaskID: "t1"}:                       "g1,g3,g4",
			} {
				if got := ids(f); got != want {
					t.Errorf("%+v: %s, want %s", f, got, want)
				}
			}
			gs, _ := s.Grants(t.Context(), mcp.GrantFilter{Principal: "key:bob", TaskID: "t1"})
			if !gs[1].Expires.Equal(in[2].Expires) || gs[1].Resource != "tmp" || gs[0].Approver != "key:alice" {
				t.Errorf("read back %+v", gs)
			}
			if err := s.RevokeGrant(t.Context(), "g1"); err != nil {
				t.Fatal(err)
			}
			if err := s.RevokeGrant(t.Context(), "g1"); !errors.Is(err, mcp.ErrGrantNotFound) {
				t.Fatalf("second revoke: %v", err)
			}
			if got := ids(mcp.GrantFilter{}); got != "g2,g3,g4" {
				t.Errorf("after revoke: %s", got)
			}
			if err := s.PutGrant(t.Context(), policy.Grant{ID: "bad", Scope: policy.ScopeResource, Principal: "key:bob", Tool: "x"}); err == nil {
				t.Error("a scope grant without an expiry was stored")
			}
		})
	}
}

// TestPipelineGrants: a task approval makes a grant that lets the caller's later calls of
// the tool in that task run unasked, and only those; it never beats a deny or a mandatory
// ask; revoking it asks again; without a store a wider approval is refused.
func TestPipelineGrants(t *testing.T) {
	m := exampleManager(t)
	for name, open := range grantBackends() {
		t.Run(name, func(t *testing.T) {
			audit, store := open(t)
			// destructive and high risk with approval none: the default layer asks, and a
			// grant may answer.
			contracts := []mcp.Contract{{Tool: "ex__write_note", Effect: mcp.EffectDestructive, Risk: mcp.RiskHigh, Approval: mcp.ApprovalNone}}
			opts := []mcp.PipelineOption{mcp.WithApprovers(approvers("alice")), mcp.WithGrants(store)}
			p, err := mcp.NewPipeline(m, contracts, audit, opts...)
			if err != nil {
				t.Fatal(err)
			}
			run := func(prop mcp.Proposal, a *mcp.Approval) mcp.PipelineResult {
				t.Helper()
				if prop.SnapshotVersion == "" {
					prop.SnapshotVersion = m.Snapshot().Version
				}
				return p.Run(t.Context(), prop, a)
			}
			write := func(task, principal, note string) mcp.Proposal {
				return mcp.Proposal{TaskID: task, Principal: principal, Tool: "ex__write_note", Arguments: map[string]any{"name": note, "text": "x"}}
			}
			first := write("t1", "bob", name+"-a")
			r := run(first, nil)
			wantOutcome(t, r, mcp.OutcomeApprovalRequired)
			req := r.Approval
			approval := &mcp.Approval{Approver: "alice", Tool: req.Tool, SnapshotVersion: req.SnapshotVersion, Digest: req.Digest, Token: req.Token, Scope: policy.ScopeTask}
			r = run(first, approval)
			wantOutcome(t, r, mcp.OutcomeSuccess)
			recs, _ := audit.List(t.Context(), mcp.AuditFilter{Limit: 1})
			grantID := recs[0].Grant
			if grantID == "" || recs[0].Approver != "alice" {
				t.Fatalf("record %+v names no grant", recs[0])
			}

			// Another call of the tool in the task runs unasked, decided by the grant.
			r = run(write("t1", "bob", name+"-b"), nil)
			wantOutcome(t, r, mcp.OutcomeSuccess)
			if r.Policy.Rule != "grant:"+grantID || r.Policy.Layer != policy.LayerGrant {
				t.Fatalf("decided by %s (%s)", r.Policy.Rule, r.Policy.Layer)
			}
			// Not in another task, nor for another caller.
			wantOutcome(t, run(write("t2", "bob", name+"-c"), nil), mcp.OutcomeApprovalRequired)
			wantOutcome(t, run(write("t1", "carol", name+"-d"), nil), mcp.OutcomeApprovalRequired)

			// A deny added by a reload beats the grant.
			if err := p.Reconfigure(contracts, append(opts, mcp.WithPolicy(policy.Rule{ID: "no-writes", Layer: "resource", Tools: []string{"ex__write_*"}}))...); err != nil {
				t.Fatal(err)
			}
			r = run(write("t1", "bob", name+"-e"), nil)
			wantOutcome(t, r, mcp.OutcomePermissionDenied)
			if r.Policy.Rule != "no-writes" || len(r.Policy.Matched) < 2 || r.Policy.Matched[1].Rule != "grant:"+grantID {
				t.Fatalf("decision %+v", r.Policy)
			}
			// So does a mandatory ask: and a task approval of it is refused.
			mandatory := []mcp.Contract{{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskHigh, Approval: mcp.ApprovalMandatory}}
			if err := p.Reconfigure(mandatory, opts...); err != nil {
				t.Fatal(err)
			}
			r = run(write("t1", "bob", name+"-f"), nil)
			wantOutcome(t, r, mcp.OutcomeApprovalRequired)
			req = r.Approval
			wide := &mcp.Approval{Approver: "alice", Tool: req.Tool, SnapshotVersion: req.SnapshotVersion, Digest: req.Digest, Token: req.Token, Scope: policy.ScopeTask}
			if r := run(write("t1", "bob", name+"-f"), wide); r.Outcome != mcp.OutcomeApprovalRequired || !strings.Contains(r.Err.Error(), "every time") {
				t.Fatalf("a task approval of a mandatory call: %s %v", r.Outcome, r.Err)
			}

			// Revoked, the grant covers nothing.
			if err := p.Reconfigure(contracts, opts...); err != nil {
				t.Fatal(err)
			}
			if err := store.RevokeGrant(t.Context(), grantID); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, run(write("t1", "bob", name+"-g"), nil), mcp.OutcomeApprovalRequired)

			// Without a store, a task approval is refused rather than taken for once.
			bare, err := mcp.NewPipeline(m, contracts, audit, mcp.WithApprovers(approvers("alice")))
			if err != nil {
				t.Fatal(err)
			}
			prop := write("t3", "bob", name+"-h")
			prop.SnapshotVersion = m.Snapshot().Version
			r = bare.Run(t.Context(), prop, nil)
			req = r.Approval
			wide = &mcp.Approval{Approver: "alice", Tool: req.Tool, SnapshotVersion: req.SnapshotVersion, Digest: req.Digest, Token: req.Token, Scope: policy.ScopeTask}
			if r := bare.Run(t.Context(), prop, wide); r.Outcome != mcp.OutcomeApprovalRequired || !strings.Contains(r.Err.Error(), "keeps no grants") {
				t.Fatalf("a task approval without a store: %s %v", r.Outcome, r.Err)
			}
		})
	}
}
