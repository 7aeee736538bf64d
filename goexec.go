package handoff

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

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
	x     a2asrv.AgentExecutor
	tools *tools // nil without mcp_servers
}

var (
	_ a2asrv.AgentExecutor = (*goSkill)(nil)
	_ tasks.ApprovalReader = (*goSkill)(nil)
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
		for ev, err := range g.x.Execute(withToolSet(ctx, ts), ec) {
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

// Cancel implements [a2asrv.AgentExecutor] by the program's executor.
func (g *goSkill) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return g.x.Cancel(ctx, ec)
}

// Approval implements [tasks.ApprovalReader]: an approver's answer to a
// call the program's executor made through [Tools].
func (g *goSkill) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	return approvalDecision(ec)
}

// toolSetKey carries a task's ToolSet to the Go executor running it.
type toolSetKey struct{}

// withToolSet gives a Go executor its task's tools: request-scoped data,
// the capability the task was given, not control flow.
func withToolSet(ctx context.Context, ts *ToolSet) context.Context {
	return context.WithValue(ctx, toolSetKey{}, ts)
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
	if ts, ok := ctx.Value(toolSetKey{}).(*ToolSet); ok {
		return ts
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
