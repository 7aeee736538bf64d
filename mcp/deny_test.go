package mcp_test

import (
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
)

// TestPipelineDenyByApprover: an approver's denial ends a waiting call
// permission_denied without running it, with a reason naming the approver,
// and one audit record carrying the approver and the arguments' digest; a
// denial by someone who may not approve leaves the call waiting, with the
// same request to answer, and is audited too.
func TestPipelineDenyByApprover(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskHigh,
		Approval: mcp.ApprovalMandatory, Redact: []string{"text"}}}, mcp.WithApprovers(approvers("alice")))
	prop := mcp.Proposal{TaskID: "task-1", Principal: "bob", Tool: "ex__write_note", SnapshotVersion: m.Snapshot().Version,
		Arguments: map[string]any{"name": "denied", "text": "TOPSECRET-3"}}
	asked := h.run(t, prop, nil)
	wantOutcome(t, asked, mcp.OutcomeApprovalRequired)

	h.runs++
	refused := h.p.Deny(t.Context(), prop, mcp.Denial{Approver: "bob", Reason: "mine"})
	wantOutcome(t, refused, mcp.OutcomeApprovalRequired)
	if refused.Approval == nil || refused.Approval.Token != asked.Approval.Token || refused.Approval.Digest != asked.Approval.Digest ||
		refused.Approval.Arguments["text"] != mcp.Redacted {
		t.Errorf("a non-approver's denial: request %+v, want the call's own, redacted", refused.Approval)
	}
	if rec := h.record(t, refused); rec.Approver != "" || rec.Outcome != mcp.OutcomeApprovalRequired {
		t.Errorf("the refused denial's record: %+v", rec)
	}

	h.runs++
	denied := h.p.Deny(t.Context(), prop, mcp.Denial{Approver: "alice", Reason: "not today"})
	wantOutcome(t, denied, mcp.OutcomePermissionDenied)
	if denied.Err == nil || denied.Err.Error() != "denied by alice: not today" {
		t.Errorf("denial reason: %v", denied.Err)
	}
	rec := h.record(t, denied)
	if rec.Approver != "alice" || rec.Decision != mcp.DecisionAsk || rec.ArgsDigest != asked.Digest || rec.Reason != "denied by alice: not today" {
		t.Errorf("the denial's record: %+v", rec)
	}
	if got := noteText(t, m, "denied"); got != "" {
		t.Errorf("the denied call ran: note %q", got)
	}
}
