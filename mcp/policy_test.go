package mcp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// TestPipelinePolicy: the pipeline decides through the policy engine, on canonical resources,
// and the audit record names the rule, its layer, the policy version and the resources.
func TestPipelinePolicy(t *testing.T) {
	m := exampleManager(t)
	notes := []policy.ResourceSpec{{Pointer: "/name", Kind: policy.KindPath}}
	contracts := []mcp.Contract{
		{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone, Resources: notes},
		{Tool: "ex__read_note", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone, Resources: notes},
	}
	rules := []policy.Rule{
		{ID: "acme-no-writes", Layer: "tenant", Tenants: []string{"acme"}, Tools: []string{"ex__write_*"}},
		{ID: "payments", Layer: "resource", Paths: []string{"payments"}, Reason: "payments are off limits"},
		{ID: "exports", Layer: "allow", Skills: []string{"export"}, Tools: []string{"ex__write_note"}, Paths: []string{"exports"}},
	}
	h := newHarness(t, m, contracts, mcp.WithPolicy(rules...))
	for _, tc := range []struct {
		name    string
		prop    mcp.Proposal
		outcome mcp.Outcome
		rule    string
		layer   policy.Layer
		res     string
	}{
		{"resource deny through ..", mcp.Proposal{Skill: "export", Tool: "ex__write_note", Arguments: map[string]any{"name": "./exports/../payments/x", "text": "t"}},
			mcp.OutcomePermissionDenied, "payments", policy.LayerResource, "payments/x"},
		{"skill allow", mcp.Proposal{Skill: "export", Tool: "ex__write_note", Arguments: map[string]any{"name": "exports/a", "text": "t"}},
			mcp.OutcomeSuccess, "exports", policy.LayerAllow, "exports/a"},
		{"tenant deny beats the skill allow", mcp.Proposal{Tenant: "acme", Skill: "export", Tool: "ex__write_note", Arguments: map[string]any{"name": "exports/b", "text": "t"}},
			mcp.OutcomePermissionDenied, "acme-no-writes", policy.LayerTenant, "exports/b"},
		{"a name leaving its root", mcp.Proposal{Tool: "ex__read_note", Arguments: map[string]any{"name": "../x"}},
			mcp.OutcomePermissionDenied, policy.RuleBadResource, policy.LayerResource, ""},
		{"no contract", mcp.Proposal{Tool: "ex__list_notes"},
			mcp.OutcomePermissionDenied, policy.RuleNoContract, policy.LayerDefault, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(t, tc.prop, nil)
			wantOutcome(t, r, tc.outcome)
			if r.Policy.Rule != tc.rule || r.Policy.Layer != tc.layer {
				t.Fatalf("decided by %s (%s), want %s (%s)", r.Policy.Rule, r.Policy.Layer, tc.rule, tc.layer)
			}
			rec := h.record(t, r)
			if rec.Rule != tc.rule || rec.Layer != tc.layer || rec.PolicyVersion == "" || rec.PolicyVersion != r.Policy.Version {
				t.Fatalf("record %+v", rec)
			}
			if tc.res != "" && (len(rec.Resources) != 1 || rec.Resources[0].Value != tc.res) {
				t.Fatalf("record resources %+v, want %s", rec.Resources, tc.res)
			}
			if tc.outcome == mcp.OutcomePermissionDenied && rec.Reason == "" {
				t.Fatal("a denial with no reason")
			}
			x, err := h.p.Explain(tc.prop)
			if err != nil || x.Rule != tc.rule || x.Verdict != r.Policy.Verdict || x.Version != rec.PolicyVersion {
				t.Fatalf("explain %+v, %v", x, err)
			}
		})
	}
	if r := h.run(t, mcp.Proposal{Skill: "export", Tool: "ex__write_note", Arguments: map[string]any{"name": "payments/y", "text": "t"}}, nil); !strings.Contains(r.Err.Error(), "payments are off limits") {
		t.Fatalf("reason %v", r.Err)
	}
	if got := noteText(t, m, "payments/x"); got != "" {
		t.Fatalf("a denied write ran: %q", got)
	}

	// A reload makes a new version; the old one stays in the records made under it.
	before := h.p.Explain
	x1, _ := before(mcp.Proposal{Tool: "ex__read_note", Arguments: map[string]any{"name": "a"}})
	if err := h.p.Reconfigure(contracts, mcp.WithPolicy(rules[1:]...)); err != nil {
		t.Fatal(err)
	}
	x2, _ := h.p.Explain(mcp.Proposal{Tool: "ex__read_note", Arguments: map[string]any{"name": "a"}})
	if x1.Version == x2.Version {
		t.Fatalf("version %s unchanged by a reload of the rules", x1.Version)
	}
	if err := h.p.Reconfigure(contracts, mcp.WithPolicy(policy.Rule{ID: "bad", Layer: "nowhere"})); err == nil || !strings.Contains(err.Error(), "rules[0].layer") {
		t.Fatalf("bad rules: %v", err)
	}
}

// TestExplainWithoutServers: Explain needs no Manager and decides as the pipeline would.
func TestExplainWithoutServers(t *testing.T) {
	x, err := mcp.Explain([]mcp.Contract{{Tool: "web__fetch", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone,
		Resources: []policy.ResourceSpec{{Pointer: "/url", Kind: policy.KindURL}}}},
		mcp.Proposal{Tool: "web__fetch", Arguments: map[string]any{"url": "HTTPS://Example.COM:443/a"}},
		mcp.WithPolicy(policy.Rule{ID: "example", Layer: "resource", URLs: []string{"https://example.com/a"}}))
	if err != nil {
		t.Fatal(err)
	}
	if x.Verdict != policy.Deny || x.Rule != "example" || len(x.Resources) != 1 || x.Resources[0].Value != "https://example.com/a" {
		t.Fatalf("%+v", x)
	}
	if _, err := mcp.Explain([]mcp.Contract{{Tool: "a__b", Resources: []policy.ResourceSpec{{Pointer: "nope", Kind: "path"}}}}, mcp.Proposal{Tool: "a__b"}); err == nil {
		t.Fatal("a bad resource spec explained")
	}
}

// TestReconfigureKeepsInFlightVersion: a call running across a reload of the rules finishes
// under the version it was decided by, and its audit record says so; the next call is
// decided by the new one.
func TestReconfigureKeepsInFlightVersion(t *testing.T) {
	m := exampleManager(t)
	dir := t.TempDir()
	started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
	contracts := []mcp.Contract{{Tool: "ex__slow", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}}
	// The guard hook runs once the call is decided: its file says the Run holds its policy.
	marker := mcp.WithHooks(mcp.Hook{Name: "started", Point: mcp.HookPreToolCall, Command: script(t, dir, "mark-started", `cat > /dev/null; touch "`+started+`"`)})
	old := mcp.WithPolicy(policy.Rule{ID: "old", Layer: "allow", Tools: []string{"ex__slow"}})
	h := newHarness(t, m, contracts, old, marker)
	slow := mcp.Proposal{TaskID: "t1", Tool: "ex__slow", Arguments: map[string]any{"ms": 60000, "until_file": release}}
	done := make(chan mcp.PipelineResult, 1)
	go func() { done <- h.run(t, slow, nil) }()
	for deadline := time.Now().Add(30 * time.Second); ; { // poll: a file has no notification that works everywhere
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := h.p.Reconfigure(contracts, mcp.WithPolicy(policy.Rule{ID: "new", Layer: "allow", Tools: []string{"ex__slow"}})); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	wantOutcome(t, r, mcp.OutcomeSuccess)
	rec := h.record(t, r)
	if rec.Rule != "old" || rec.PolicyVersion != r.Policy.Version {
		t.Fatalf("in-flight record %+v", rec)
	}
	next := h.run(t, slow, nil)
	wantOutcome(t, next, mcp.OutcomeSuccess)
	if next.Policy.Rule != "new" || next.Policy.Version == rec.PolicyVersion {
		t.Fatalf("next call decided by %s at version %s (the old was %s)", next.Policy.Rule, next.Policy.Version, rec.PolicyVersion)
	}
}
