package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp"
)

// checkExecutors matches the Go executors given to New with the config's
// `go` skills, naming each one that has no partner.
func checkExecutors(c *Config, given map[string]a2asrv.AgentExecutor) error {
	var errs []error
	goSkills := map[string]bool{}
	for _, s := range allSkills(c) {
		if s.Executor != "go" {
			continue
		}
		goSkills[s.ID] = true
		if given[s.ID] == nil {
			errs = append(errs, fmt.Errorf("%s: skill %s has executor: go, and no executor was given for it (handoff.WithExecutor(%q, x))", c.path, s.ID, s.ID))
		}
	}
	for id := range given {
		if !goSkills[id] {
			errs = append(errs, fmt.Errorf("%s: handoff.WithExecutor names skill %s, which the config does not declare with executor: go", c.path, id))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// allSkills are the public card's skills and the extended card's.
func allSkills(c *Config) []SkillConfig {
	all := c.Skills
	if c.ExtendedCard != nil {
		all = append(slices.Clone(all), c.ExtendedCard.Skills...)
	}
	return all
}

// ToolSet is the agent's MCP catalog as one task of a Go executor sees it.
// Every call goes through the governed pipeline: the snapshot check, the
// arguments against the tool's schema, the local contract and policy, an
// approval where the policy asks for one, the deadline, normalisation and
// the audit record.
type ToolSet struct {
	caps *skill.Caps // nil outside a Go executor's Execute
}

// Tools returns the governed tools of the task a Go executor runs (see
// [WithExecutor]). Outside such an Execute, its methods fail with
// [ErrNoTools].
func Tools(ctx context.Context) *ToolSet {
	return &ToolSet{caps: skill.CapsFrom(ctx)}
}

// Snapshot returns the catalog the task's calls are planned against, or nil
// without MCP servers.
func (t *ToolSet) Snapshot() *mcp.Snapshot { return t.caps.Snapshot() }

// ToolResult is the normalised outcome of one governed call.
type ToolResult struct {
	// Outcome is how the call ended: mcp.OutcomeSuccess, or why not
	// (validation_failed, permission_denied, timeout, unavailable_tool, ...).
	Outcome mcp.Outcome
	// StructuredContent is the tool's structured result, checked against its
	// output schema. A contract's redacted values are masked in it.
	StructuredContent any
	// Text is the tool's text content, its redacted values masked as in
	// StructuredContent.
	Text string
	// Err says why the call did not succeed; nil on success.
	Err error
}

// Call runs tool (server__tool) with args through the governed pipeline as
// the task's caller. A call that did not succeed is an outcome, not an
// error: the error is for a call that needs an approval (it wraps
// [ErrApprovalRequired]: yield it and stop) or a ToolSet outside a Go
// executor ([ErrNoTools]).
func (t *ToolSet) Call(ctx context.Context, tool string, args map[string]any) (*ToolResult, error) {
	res, err := t.caps.Call(ctx, tool, args)
	var wait *skill.ApprovalRequiredError
	if errors.As(err, &wait) {
		return nil, &ApprovalRequiredError{Request: wait.Request}
	}
	if err != nil {
		return nil, err
	}
	return &ToolResult{Outcome: res.Outcome, StructuredContent: res.StructuredContent, Text: res.Text, Err: res.Err}, nil
}

// Delegation is what [Delegate] returns: the acceptance gate's decision on
// the peer's completion and, when it committed, the evidence.
type Delegation struct {
	// Outcome is the gate's decision: acceptance.Committed, or Rejected,
	// Failed (the peer failed, or the delegation could not be followed) or
	// Unknown. Only Committed is a fact; anything else is the peer's claim
	// at most.
	Outcome acceptance.Outcome
	// Reason is why, as the task's status would say it: the checks that
	// passed for a commit, the gate's or the peer's reasons otherwise.
	Reason string
	// Peer and PeerTaskID name the peer and its task.
	Peer, PeerTaskID string
	// Artifacts are the peer's artifacts that the gate committed (raw parts
	// over the skill's blob threshold as URLs of this agent); nil unless
	// Outcome is Committed.
	Artifacts []*a2a.Artifact
}

// Delegate hands message to a verified peer through the agent's delegate
// skill skillID (its peer skill, contract, timeout and scopes), from inside a
// Go executor's Execute: the envelope, the follow of the peer's task and
// the acceptance gate, as for a delegate skill of its own. The peer's
// progress and the delegation's records are stored in the executor's task
// as working updates; the decision is returned, not applied: the executor
// answers from it. A delegation is keyed by its task, skill and order in
// the execution (TASK#SKILL-N), so an executor run again after an approval
// reaches the peer's task it already started, and the ledger holds one
// entry per delegation. The error is for a Delegate outside a Go executor
// ([ErrNoDelegation]), an unknown skill, or a task whose consumer left.
func Delegate(ctx context.Context, skillID string, message *a2a.Message) (*Delegation, error) {
	d, err := skill.CapsFrom(ctx).Delegate(ctx, skillID, message)
	if err != nil {
		return nil, err
	}
	return &Delegation{Outcome: d.Outcome, Reason: d.Reason, Peer: d.Peer, PeerTaskID: d.PeerTaskID, Artifacts: d.Artifacts}, nil
}
