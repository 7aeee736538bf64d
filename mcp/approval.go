package mcp

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"time"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// ApprovalRequest is what a task waiting for an approval shows: enough for an approver to
// know what they approve, and nothing a contract redacts.
type ApprovalRequest struct {
	// Tool and SnapshotVersion name the tool definition the call was planned against.
	Tool, SnapshotVersion string
	// Digest is the hex SHA-256 of the canonical (RFC 8785) JSON of {tool, arguments}: the
	// approval covers exactly these arguments.
	Digest string
	// Token binds an approval to this task, tool, snapshot and digest; an [Approval] must
	// carry it back. It is not a credential: who approves is decided by the approver's
	// authenticated principal, and the token only stops an approval being moved to another
	// task or call.
	Token string
	// Arguments are the canonical arguments with every redacted top-level value replaced by
	// [Redacted], for the approver to read.
	Arguments map[string]any
	// Reason says why the call waits, and why an approval that came with it was refused.
	Reason string
}

// Approval is an approver's answer to an [ApprovalRequest], carried by a later message on
// the same task.
type Approval struct {
	// Approver must be the authenticated principal of the message that carries the approval,
	// never a name the message itself claims: the pipeline trusts it to decide who approved.
	Approver string
	// Tool, SnapshotVersion, Digest and Token echo the request being approved.
	Tool, SnapshotVersion, Digest, Token string
	// Scope is how far the approval reaches: once (empty: this call only), task (the tool's
	// calls by the same caller for the rest of the task) or scope (the tool's calls by the
	// same caller on resources under Resource until Expires). Wider than once, the pipeline
	// stores a [policy.Grant] (with [WithGrants]) when the call it approves is one a grant
	// may answer: never past a deny or a mandatory ask.
	Scope policy.Scope
	// Resource is a scope grant's path or URL prefix, canonicalised like the call's.
	Resource string
	// Expires ends a scope grant; required for one.
	Expires time.Time
}

// grantFrom is the grant an accepted approval of prop makes, or nil for a once approval.
func grantFrom(a *Approval, prop Proposal, now time.Time) (*policy.Grant, error) {
	if a.Scope == "" || a.Scope == policy.ScopeOnce {
		return nil, nil
	}
	g := &policy.Grant{ID: NewGrantID(), Scope: a.Scope, Approver: a.Approver, Principal: prop.Principal,
		Tool: prop.Tool, Created: now.UTC(), Expires: a.Expires.UTC()}
	if a.Expires.IsZero() {
		g.Expires = time.Time{}
	}
	switch a.Scope {
	case policy.ScopeTask:
		g.TaskID = prop.TaskID
	case policy.ScopeResource:
		if a.Resource != "" {
			r, err := policy.CanonicalURL(a.Resource)
			if err != nil {
				r, err = policy.CanonicalPath("", a.Resource)
			}
			if err != nil {
				return nil, fmt.Errorf("grant resource %q is neither a URL nor a path under the root", a.Resource)
			}
			g.Resource = r
		}
	}
	if err := g.Check(); err != nil {
		return nil, err
	}
	return g, nil
}

// approvalToken is HMAC-SHA256(key, taskID|tool|snapshot|digest), hex. Each field is length
// prefixed, so that a "|" inside a task id or tool name cannot make two different calls
// share a token.
func approvalToken(key []byte, taskID, tool, snapshot, digest string) string {
	mac := hmac.New(sha256.New, key)
	for _, f := range []string{taskID, tool, snapshot, digest} {
		writeField(mac, f)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// idempotencyKey derives a call's idempotency key from what its scope covers; "" means the
// call carries none. Fields are length prefixed as in approvalToken, and the scope is
// hashed too, so that keys of different scopes never meet.
func idempotencyKey(scope IdempotencyScope, taskID, tool, digest string) string {
	if scope == IdempotencyNone || digest == "" || (scope == IdempotencyTask && taskID == "") {
		return ""
	}
	if scope == IdempotencyArguments {
		taskID = ""
	}
	h := sha256.New()
	for _, f := range []string{"handoff idempotency v1", string(scope), taskID, tool, digest} {
		writeField(h, f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeField(h hash.Hash, f string) {
	fmt.Fprintf(h, "%d:%s|", len(f), f)
}

// mayApprove reports whether principal may approve calls under this policy ([WithApprovers]).
func (pol *governance) mayApprove(principal string) bool {
	return principal != "" && pol.cfg.isApprover != nil && pol.cfg.isApprover(principal)
}

// checkApproval reports why an approval does not let this proposal run, or "" if it does.
// The reasons name no argument values, only what did not match.
func (pol *governance) checkApproval(prop Proposal, digest string, a *Approval) string {
	switch {
	case !pol.mayApprove(a.Approver):
		return fmt.Sprintf("approval refused: %q may not approve tool calls", a.Approver)
	case a.Tool != prop.Tool:
		return fmt.Sprintf("approval refused: it is for tool %s, not %s", a.Tool, prop.Tool)
	case a.SnapshotVersion != prop.SnapshotVersion:
		return "approval refused: it is for another catalog snapshot; approve the call as planned now"
	case a.Digest != digest:
		return "approval refused: it is for different arguments"
	}
	want := approvalToken(pol.cfg.key, prop.TaskID, prop.Tool, prop.SnapshotVersion, digest)
	if !hmac.Equal([]byte(a.Token), []byte(want)) {
		return "approval refused: its token does not match this task and call"
	}
	return ""
}
