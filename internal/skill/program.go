package skill

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/tasks"
)

// Program runs a program's own executor (a skill with `executor: go`),
// giving it the governed tools and the delegations through its context
// (see [CapsFrom]).
type Program struct {
	skill     string // the skill's id, for the policy's skill rules
	x         a2asrv.AgentExecutor
	tools     *MCP                    // nil without mcp_servers
	out       *Outbound               // nil without peers
	delegates map[string]DelegateSpec // the agent's delegate skills, by id
}

var (
	_ a2asrv.AgentExecutor = (*Program)(nil)
	_ tasks.ApprovalReader = (*Program)(nil)
	_ tasks.QuietBound     = (*Program)(nil)
)

// NewProgram returns the executor that runs x with tools (nil in an agent
// without MCP servers) and delegations through out (nil in an agent without
// peers) to the agent's delegate skills, by id.
func NewProgram(skill string, x a2asrv.AgentExecutor, tools *MCP, out *Outbound, delegates map[string]DelegateSpec) *Program {
	return &Program{skill: skill, x: x, tools: tools, out: out, delegates: delegates}
}

// Execute implements [a2asrv.AgentExecutor]: it runs the program's
// executor with its [Caps] in its context, and turns a call that needs an
// approval (an error wrapping an [ApprovalRequiredError], from
// [Caps.Call]) into an input-required status carrying the approval
// request, as a [Tool] does. The approver's answer runs Execute again, with
// the task stored; the same call then goes through.
func (g *Program) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		started := ec.StoredTask != nil
		caps := &Caps{skill: g.skill, tools: g.tools, ec: ec, approval: approvalFrom(ec), out: g.out, delegates: g.delegates}
		// A delegation's progress and records go into this task's log, in
		// order with the executor's own events (same goroutine).
		caps.emit = func(ev a2a.Event, err error) bool {
			if !started {
				started = true
				if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
					return false
				}
			}
			return yield(ev, err)
		}
		for ev, err := range g.x.Execute(withCaps(ctx, caps), ec) {
			if caps.stopped {
				return
			}
			var wait *ApprovalRequiredError
			if errors.As(err, &wait) {
				if !started && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
					return
				}
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, approvalRequestMessage(ec, wait.Request)), nil)
				return
			}
			if err == nil && ev != nil {
				started = true
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// QuietFor implements [tasks.QuietBound]: a program's executor may wait on
// a delegation ([Caps.Delegate]) as long as the agent's longest delegate
// skill may.
func (g *Program) QuietFor(*a2asrv.ExecutorContext) time.Duration {
	var d time.Duration
	for _, spec := range g.delegates {
		d = max(d, spec.Timeout+quietMargin)
	}
	return d
}

// Cancel implements [a2asrv.AgentExecutor] by the program's executor.
func (g *Program) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return g.x.Cancel(ctx, ec)
}

// Approval implements [tasks.ApprovalReader]: an approver's answer to a
// call the program's executor made through [Caps.Call].
func (g *Program) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	return approvalDecision(ec)
}

// capsKey carries a task's capabilities to the program's executor running it.
type capsKey struct{}

// Caps are what one execution of a [Program]'s executor may use: the
// governed tools and the delegations. Its methods work on a nil *Caps,
// failing with [ErrNoTools] or [ErrNoDelegation].
type Caps struct {
	skill     string
	tools     *MCP // nil without mcp_servers
	ec        *a2asrv.ExecutorContext
	approval  *mcp.Approval           // the approver's answer this execution carries, if any
	out       *Outbound               // nil without peers
	delegates map[string]DelegateSpec // the agent's delegate skills, by id
	emit      func(a2a.Event, error) bool
	stopped   bool // emit returned false: the task's consumer is gone
	sent      int  // delegations made in this execution, for their keys
}

// withCaps gives a program's executor its task's capabilities: request-
// scoped data, what the task was given, not control flow.
func withCaps(ctx context.Context, c *Caps) context.Context {
	return context.WithValue(ctx, capsKey{}, c)
}

// CapsFrom returns the capabilities of the task whose execution ctx is (a
// [Program]'s Execute), or nil outside one.
func CapsFrom(ctx context.Context) *Caps {
	c, _ := ctx.Value(capsKey{}).(*Caps)
	return c
}

// Snapshot returns the catalog the task's calls are planned against, or nil
// without MCP servers.
func (c *Caps) Snapshot() *mcp.Snapshot {
	if c == nil || c.tools == nil {
		return nil
	}
	return c.tools.Manager.Snapshot()
}

// ToolResult is the normalised outcome of one governed call.
type ToolResult struct {
	// Outcome is how the call ended: mcp.OutcomeSuccess, or why not.
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
// error: the error is an [*ApprovalRequiredError] for a call that needs an
// approval, or [ErrNoTools].
func (c *Caps) Call(ctx context.Context, tool string, args map[string]any) (*ToolResult, error) {
	if c == nil || c.tools == nil {
		return nil, ErrNoTools
	}
	snap := waitForTool(ctx, c.tools.Manager, tool)
	prop := mcp.Proposal{TaskID: string(c.ec.TaskID), Principal: principalOf(c.ec), Tenant: tenantOf(c.ec), Skill: c.skill,
		Tool: tool, Arguments: args}
	if snap != nil {
		prop.SnapshotVersion = snap.Version
	}
	var approval *mcp.Approval
	if c.approval != nil && c.approval.Tool == tool {
		approval = c.approval
	}
	res := c.tools.Pipeline.Run(ctx, prop, approval)
	if res.Outcome == mcp.OutcomeApprovalRequired && res.Approval != nil {
		return nil, &ApprovalRequiredError{Request: res.Approval}
	}
	scrub := res.Scrub
	if scrub == nil {
		scrub = func(s string) string { return s }
	}
	out := &ToolResult{Outcome: res.Outcome, Err: res.Err, Text: scrub(textOf(res.Content))}
	if res.StructuredContent != nil {
		out.StructuredContent = scrubValue(res.StructuredContent, scrub)
	}
	if res.Outcome != mcp.OutcomeSuccess && out.Err == nil {
		out.Err = fmt.Errorf("tool %s ended %s", tool, res.Outcome)
	}
	return out, nil
}

// delegationKeySep joins a task's id and a program's delegation in the
// delegation's id (TASK#SKILL-N).
const delegationKeySep = "#"

// TaskOfDelegation is the local task that made the delegation id, as the
// ledger and the index of delegations name it: the task's own id for a
// delegate skill, TASK#SKILL-N for a program's delegation.
func TaskOfDelegation(id string) a2a.TaskID {
	task, _, _ := strings.Cut(id, delegationKeySep)
	return a2a.TaskID(task)
}

// Delegated is what [Caps.Delegate] returns: the acceptance gate's decision
// on the peer's completion and, when it committed, the evidence.
type Delegated struct {
	// Outcome is the gate's decision; only Committed is a fact.
	Outcome acceptance.Outcome
	// Reason is why, as the task's status would say it.
	Reason string
	// Peer and PeerTaskID name the peer and its task.
	Peer, PeerTaskID string
	// Artifacts are the peer's artifacts that the gate committed; nil
	// unless Outcome is Committed.
	Artifacts []*a2a.Artifact
}

// Delegate hands message to a verified peer through the agent's delegate
// skill skill (its peer skill, contract, timeout and scopes): the envelope,
// the follow of the peer's task and the acceptance gate, as a [Delegate]
// executor does. The peer's progress and the delegation's records are
// stored in the task as working updates; the decision is returned, not
// applied. A delegation is keyed by its task, skill and order in the
// execution (TASK#SKILL-N), so an executor run again after an approval
// reaches the peer's task it already started, and the ledger holds one
// entry per delegation. The error is [ErrNoDelegation], an unknown skill,
// a message without parts, or a task whose consumer left.
func (c *Caps) Delegate(ctx context.Context, skill string, message *a2a.Message) (*Delegated, error) {
	if c == nil || c.out == nil {
		return nil, ErrNoDelegation
	}
	spec, ok := c.delegates[skill]
	if !ok {
		return nil, fmt.Errorf("delegate: the agent has no delegate skill %s", skill)
	}
	if message == nil || len(message.Parts) == 0 {
		return nil, fmt.Errorf("delegate %s: %w: the message has no parts", skill, a2a.ErrInvalidParams)
	}
	c.sent++
	return c.delegate(ctx, skill, spec, strconv.Itoa(c.sent), message)
}

// delegate runs one delegation of the task to the delegate skill skill,
// named by its task, skill and n (TASK#SKILL-N): a program's order in the
// execution, a model's tool call id.
func (c *Caps) delegate(ctx context.Context, skill string, spec DelegateSpec, n string, message *a2a.Message) (*Delegated, error) {
	s := &Delegate{id: skill, spec: spec, out: c.out,
		key: string(c.ec.TaskID) + delegationKeySep + skill + "-" + n}
	peer, ok := s.findPeer(ctx)
	if !ok {
		return &Delegated{Outcome: acceptance.Failed,
			Reason: fmt.Sprintf("No verified peer offers skill %s; see handoff peers.", spec.Skill)}, nil
	}
	out := &Delegated{Peer: peer.Name}
	var final *a2a.TaskStatusUpdateEvent
	// The delegation's end and its committed artifacts are the executor's
	// to use; everything else is this task's progress.
	sink := func(ev a2a.Event, err error) bool {
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			out.Artifacts = append(out.Artifacts, e.Artifact)
			return true
		case *a2a.TaskStatusUpdateEvent:
			if e.Status.State.Terminal() {
				final = e
				return true
			}
		}
		if c.stopped || !c.emit(ev, err) {
			c.stopped = true
			return false
		}
		return true
	}
	rec := s.newRecord(c.ec, peer)
	if s.track(ctx, c.ec, rec, sink, fmt.Sprintf("Delegating %s to %s.", skill, peer.Name)) {
		s.delegate(ctx, c.ec, peer, rec, message.Parts, sink)
	}
	if c.stopped {
		return nil, fmt.Errorf("delegate %s: %w", skill, context.Canceled)
	}
	if final == nil { // the record could not be written
		return &Delegated{Outcome: acceptance.Failed, Peer: peer.Name, Reason: "The delegation could not be recorded."}, nil
	}
	out.PeerTaskID, out.Reason = rec.RemoteTaskID, messageText(final.Status.Message)
	if err := out.Outcome.UnmarshalText([]byte(rec.Outcome)); err != nil {
		out.Outcome = acceptance.Failed // ended before the gate, as an agent that stops does
	}
	if out.Outcome != acceptance.Committed {
		out.Artifacts = nil
	}
	return out, nil
}
