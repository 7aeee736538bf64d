package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Denial is an approver's refusal of a call waiting for approval, carried by a later message
// on the same task (the console's Deny button, "handoff deny").
type Denial struct {
	// Approver is the authenticated principal of the message that carries the denial, as for
	// [Approval.Approver].
	Approver string
	// Reason is the approver's explanation, kept in the audit record and shown to the caller.
	Reason string
}

// Deny ends a proposal that waits for approval without calling its tool, on an approver's
// word: the result is [OutcomePermissionDenied] with a reason naming the approver, and one
// [AuditRecord] with the approver's identity, as [Pipeline.Run] writes for an approved call.
// A denial by a principal that may not approve changes nothing: the result is
// [OutcomeApprovalRequired] again, with the same request, and is audited too. Unlike an
// approval a denial carries no token: it can only stop a call, so it needs no binding to the
// call's arguments.
func (p *Pipeline) Deny(ctx context.Context, prop Proposal, d Denial) PipelineResult {
	start := time.Now()
	pol := p.gov.Load()
	rec := &AuditRecord{
		Time:            start.UTC(),
		TaskID:          prop.TaskID,
		Principal:       prop.Principal,
		Tool:            prop.Tool,
		SnapshotVersion: prop.SnapshotVersion,
		Decision:        DecisionAsk,
	}
	args, _, digest, err := canonicalise(prop.Tool, prop.Arguments)
	if err == nil {
		rec.ArgsDigest = digest
	}
	var res PipelineResult
	if !pol.mayApprove(d.Approver) {
		rec.Outcome = OutcomeApprovalRequired
		rec.Reason = fmt.Sprintf("denial refused: %q may not approve tool calls", d.Approver)
		// The call still waits: the request an approver answers stays as it was.
		res.Approval = &ApprovalRequest{Tool: prop.Tool, SnapshotVersion: prop.SnapshotVersion, Digest: digest,
			Token:     approvalToken(pol.cfg.key, prop.TaskID, prop.Tool, prop.SnapshotVersion, digest),
			Arguments: shown(args, pol.contracts.lookup(prop.Tool).Redact), Reason: rec.Reason}
	} else {
		rec.Outcome, rec.Approver = OutcomePermissionDenied, d.Approver
		rec.Reason = "denied by " + d.Approver
		if d.Reason != "" {
			rec.Reason += ": " + d.Reason
		}
	}
	res.Outcome, res.Err, res.Decision, res.Digest = rec.Outcome, errors.New(rec.Reason), DecisionAsk, rec.ArgsDigest
	res.Tool, res.SnapshotVersion = prop.Tool, prop.SnapshotVersion
	rec.Duration = time.Since(start)
	res.Duration = rec.Duration
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pol.cfg.auditTimeout)
	defer cancel()
	if err := p.audit.Append(actx, rec); err != nil {
		res.AuditErr = fmt.Errorf("audit denial of %s for task %s: %w", prop.Tool, prop.TaskID, err)
	} else {
		res.AuditID = rec.ID
	}
	return res
}
