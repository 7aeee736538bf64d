package handoff

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/tasks"
)

// WithExecutor runs the skill skillID, declared with `executor: go` in the
// config, with x: an executor written for a2a-go runs unchanged. Inside
// Execute, x reaches the agent's MCP tools only through [Tools], which
// governs every call. New fails when a `go` skill has no executor, or when
// skillID names no `go` skill.
func WithExecutor(skillID string, x a2asrv.AgentExecutor) Option {
	return optionFunc(func(o *agentOptions) {
		if o.executors == nil {
			o.executors = map[string]a2asrv.AgentExecutor{}
		}
		o.executors[skillID] = x
	})
}

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

// goSkill runs a program's own executor, giving it the governed tool
// pipeline through its context (see [Tools]).
type goSkill struct {
	x         a2asrv.AgentExecutor
	tools     *tools                     // nil without mcp_servers
	d         *delegating                // nil without peers
	delegates map[string]*DelegateConfig // the agent's delegate skills, by id
}

var (
	_ a2asrv.AgentExecutor = (*goSkill)(nil)
	_ tasks.ApprovalReader = (*goSkill)(nil)
	_ tasks.QuietBound     = (*goSkill)(nil)
)

// Execute implements [a2asrv.AgentExecutor]: it runs the program's
// executor with a [ToolSet] in its context, and turns a call that needs an
// approval (an error wrapping [ErrApprovalRequired], from [ToolSet.Call])
// into an input-required status carrying the approval request, as a `tool`
// skill does. The approver's answer runs Execute again, with the task
// stored; the same call then goes through.
func (g *goSkill) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ts := &ToolSet{ec: ec, approval: approvalFrom(ec)}
		if g.tools != nil {
			ts.pipeline, ts.manager = g.tools.pipeline, g.tools.manager
		}
		started := ec.StoredTask != nil
		caps := &taskCaps{tools: ts, ec: ec, d: g.d, delegates: g.delegates}
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

// QuietFor implements [tasks.QuietBound]: a Go executor may wait on a
// delegation ([Delegate]) as long as the agent's longest delegate skill may.
func (g *goSkill) QuietFor(*a2asrv.ExecutorContext) time.Duration {
	var d time.Duration
	for _, cfg := range g.delegates {
		d = max(d, delegationTimeout(cfg)+quietMargin)
	}
	return d
}

// Cancel implements [a2asrv.AgentExecutor] by the program's executor.
func (g *goSkill) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return g.x.Cancel(ctx, ec)
}

// Approval implements [tasks.ApprovalReader]: an approver's answer to a
// call the program's executor made through [Tools].
func (g *goSkill) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	return approvalDecision(ec)
}

// capsKey carries a task's capabilities to the Go executor running it.
type capsKey struct{}

// taskCaps are what one execution of a Go executor may use: the governed
// tools and the delegations.
type taskCaps struct {
	tools     *ToolSet
	ec        *a2asrv.ExecutorContext
	d         *delegating                // nil without peers
	delegates map[string]*DelegateConfig // the agent's delegate skills, by id
	emit      func(a2a.Event, error) bool
	stopped   bool // emit returned false: the task's consumer is gone
	sent      int  // delegations made in this execution, for their keys
}

// withCaps gives a Go executor its task's capabilities: request-scoped
// data, what the task was given, not control flow.
func withCaps(ctx context.Context, c *taskCaps) context.Context {
	return context.WithValue(ctx, capsKey{}, c)
}

// ErrApprovalRequired is wrapped by the error [ToolSet.Call] returns for a
// call the agent's policy sends to an approver. An executor yields it (or
// an error wrapping it) and stops: the task waits input-required with the
// approval request, and Execute runs again once an approver answers.
var ErrApprovalRequired = errors.New("the call needs an approval")

// ErrNoTools is returned by a [ToolSet] outside a Go executor's Execute, or
// in an agent without MCP servers.
var ErrNoTools = errors.New("no governed tools here: Tools is for the Execute of a skill with executor: go, in an agent with mcp_servers")

// ApprovalRequiredError is the error [ToolSet.Call] returns for a call that
// needs an approval; it wraps [ErrApprovalRequired].
type ApprovalRequiredError struct {
	// Request is what the approver is shown and must answer for.
	Request *mcp.ApprovalRequest
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("tool %s: %s", e.Request.Tool, ErrApprovalRequired)
}

func (e *ApprovalRequiredError) Unwrap() error { return ErrApprovalRequired }

// ToolSet is the agent's MCP catalog as one task of a Go executor sees it.
// Every call goes through the governed pipeline: the snapshot check, the
// arguments against the tool's schema, the local contract and policy, an
// approval where the policy asks for one, the deadline, normalisation and
// the audit record.
type ToolSet struct {
	ec       *a2asrv.ExecutorContext
	pipeline *mcp.Pipeline
	manager  *mcp.Manager
	approval *mcp.Approval // the approver's answer this execution carries, if any
}

// Tools returns the governed tools of the task a Go executor runs (see
// [WithExecutor]). Outside such an Execute, its methods fail with
// [ErrNoTools].
func Tools(ctx context.Context) *ToolSet {
	if c, ok := ctx.Value(capsKey{}).(*taskCaps); ok {
		return c.tools
	}
	return &ToolSet{}
}

// Snapshot returns the catalog the task's calls are planned against, or nil
// without MCP servers.
func (t *ToolSet) Snapshot() *mcp.Snapshot {
	if t.manager == nil {
		return nil
	}
	return t.manager.Snapshot()
}

// ToolResult is the normalised outcome of one governed call.
type ToolResult struct {
	// Outcome is how the call ended: mcp.OutcomeSuccess, or why not
	// (validation_failed, permission_denied, timeout, unavailable_tool, ...).
	Outcome mcp.Outcome
	// StructuredContent is the tool's structured result, checked against its
	// output schema; Text its text content. A contract's redacted values are
	// masked in both.
	StructuredContent any
	Text              string
	// Err says why the call did not succeed; nil on success.
	Err error
}

// Call runs tool (server__tool) with args through the governed pipeline as
// the task's caller. A call that did not succeed is an outcome, not an
// error: the error is for a call that needs an approval (it wraps
// [ErrApprovalRequired]: yield it and stop) or a ToolSet outside a Go
// executor ([ErrNoTools]).
func (t *ToolSet) Call(ctx context.Context, tool string, args map[string]any) (*ToolResult, error) {
	if t.pipeline == nil || t.ec == nil {
		return nil, ErrNoTools
	}
	snap := waitForTool(ctx, t.manager, tool)
	prop := mcp.Proposal{TaskID: string(t.ec.TaskID), Principal: principalOf(t.ec), Tool: tool, Arguments: args}
	if snap != nil {
		prop.SnapshotVersion = snap.Version
	}
	var approval *mcp.Approval
	if t.approval != nil && t.approval.Tool == tool {
		approval = t.approval
	}
	res := t.pipeline.Run(ctx, prop, approval)
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

// ErrNoDelegation is returned by [Delegate] outside a Go executor's
// Execute, or in an agent without peers.
var ErrNoDelegation = errors.New("no delegation here: Delegate is for the Execute of a skill with executor: go, in an agent with peers")

// delegationKeySep joins a task's id and a Go executor's delegation in the
// delegation's id (TASK#SKILL-N).
const delegationKeySep = "#"

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
// skill skill (its peer skill, contract, timeout and scopes), from inside a
// Go executor's Execute: the envelope, the follow of the peer's task and
// the acceptance gate, as for a delegate skill of its own. The peer's
// progress and the delegation's records are stored in the executor's task
// as working updates; the decision is returned, not applied: the executor
// answers from it. A delegation is keyed by its task, skill and order in
// the execution (TASK#SKILL-N), so an executor run again after an approval
// reaches the peer's task it already started, and the ledger holds one
// entry per delegation. The error is for a Delegate outside a Go executor
// ([ErrNoDelegation]), an unknown skill, or a task whose consumer left.
func Delegate(ctx context.Context, skill string, message *a2a.Message) (*Delegation, error) {
	c, ok := ctx.Value(capsKey{}).(*taskCaps)
	if !ok || c.d == nil {
		return nil, ErrNoDelegation
	}
	cfg := c.delegates[skill]
	if cfg == nil {
		return nil, fmt.Errorf("delegate: the agent has no delegate skill %s", skill)
	}
	if message == nil || len(message.Parts) == 0 {
		return nil, fmt.Errorf("delegate %s: %w: the message has no parts", skill, a2a.ErrInvalidParams)
	}
	c.sent++
	s := &delegateSkill{id: skill, cfg: cfg, d: c.d,
		key: string(c.ec.TaskID) + delegationKeySep + skill + "-" + strconv.Itoa(c.sent)}
	peer, ok := s.findPeer(ctx)
	if !ok {
		return &Delegation{Outcome: acceptance.Failed,
			Reason: fmt.Sprintf("No verified peer offers skill %s; see handoff peers.", cfg.Skill)}, nil
	}
	out := &Delegation{Peer: peer.Name}
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
		return &Delegation{Outcome: acceptance.Failed, Peer: peer.Name, Reason: "The delegation could not be recorded."}, nil
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
