package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
	"github.com/handoff-a2a/handoff/tasks"
)

// Message data keys of the approval exchange: the agent's input-required
// status carries ApprovalRequestKey, the approver's answer ApprovalKey.
const (
	ApprovalRequestKey = "approval_request"
	ApprovalKey        = "approval"
)

// MCP is the agent's governed tool side, as its executors use it.
type MCP struct {
	// Manager holds the catalog of the agent's MCP servers.
	Manager *mcp.Manager
	// Pipeline runs every tool call: snapshot, schema, contract, policy,
	// approval, deadline, normalisation, audit.
	Pipeline *mcp.Pipeline
	// Audit is the pipeline's audit log, where a model skill records the
	// calls its loop refused before they reached the pipeline (a tool
	// outside the skill's globs); nil records none.
	Audit mcp.AuditLog
}

// Tool fulfils a skill with one MCP tool through the governed pipeline.
// A call that needs approval leaves the task in input-required; the
// proposal waits in memory for the approver's message (an agent restart
// forgets it, and the caller sends the request again).
type Tool struct {
	skill    string // the skill's id, for the policy's skill rules
	tool     string
	pipeline *mcp.Pipeline
	manager  *mcp.Manager

	mu      sync.Mutex
	pending map[a2a.TaskID]mcp.Proposal
}

var (
	_ a2asrv.AgentExecutor = (*Tool)(nil)
	_ tasks.Redactor       = (*Tool)(nil)
	_ tasks.ApprovalReader = (*Tool)(nil)
)

// NewTool returns the executor of a skill that is the MCP tool tool
// (server__tool) of m.
func NewTool(skill, tool string, m MCP) *Tool {
	return &Tool{skill: skill, tool: tool, pipeline: m.Pipeline, manager: m.Manager, pending: map[a2a.TaskID]mcp.Proposal{}}
}

// Execute implements [a2asrv.AgentExecutor].
func (s *Tool) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		var (
			prop     mcp.Proposal
			approval *mcp.Approval
		)
		if ec.StoredTask == nil {
			// The tool's schema decides how a text request becomes arguments,
			// so wait for it first (the server may still be connecting).
			snap := waitForTool(ctx, s.manager, s.tool)
			args, err := s.arguments(ec.Message, snap)
			if err != nil {
				yield(nil, a2a.NewError(a2a.ErrInvalidParams, err.Error()))
				return
			}
			prop = mcp.Proposal{TaskID: string(ec.TaskID), Principal: principalOf(ec), Tenant: tenantOf(ec), Skill: s.skill,
				Tool: s.tool, Arguments: args}
			if snap != nil {
				prop.SnapshotVersion = snap.Version
			}
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
		} else { // a message on a task waiting for approval
			s.mu.Lock()
			p, ok := s.pending[ec.TaskID]
			s.mu.Unlock()
			if !ok {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
					"Nothing waits for approval on this task (the agent may have restarted); send the request again.")), nil)
				return
			}
			prop = p
			if denial := denialFrom(ec); denial != nil { // ends the call without running it
				if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
					return
				}
				s.finish(ec, prop, s.pipeline.Deny(ctx, prop, *denial), yield)
				return
			}
			approval = approvalFrom(ec)
			if approval == nil {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, agentText(ec,
					"This task waits for an approval: a message with a data part {\"approval\": {...}} from an approver.")), nil)
				return
			}
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		res, ok := s.run(ctx, ec, prop, approval, yield)
		if !ok {
			return
		}
		s.finish(ec, prop, res, yield)
	}
}

// finish yields the events that end a pipeline result: the artifact and
// completed, input-required with the approval request, or failed.
func (s *Tool) finish(ec *a2asrv.ExecutorContext, prop mcp.Proposal, res mcp.PipelineResult, yield func(a2a.Event, error) bool) {
	switch res.Outcome {
	case mcp.OutcomeSuccess:
		s.forget(ec.TaskID)
		// The result is kept with the task: a redacted argument it echoes is masked.
		scrub := res.Scrub
		if scrub == nil {
			scrub = func(t string) string { return t }
		}
		parts := []*a2a.Part{}
		if res.StructuredContent != nil {
			parts = append(parts, a2a.NewDataPart(scrubValue(res.StructuredContent, scrub)))
		}
		if text := scrub(textOf(res.Content)); text != "" {
			parts = append(parts, a2a.NewTextPart(text))
		}
		if len(parts) == 0 {
			parts = append(parts, a2a.NewTextPart(""))
		}
		art := a2a.NewArtifactEvent(ec, parts...)
		art.Artifact.Name = s.tool
		if !yield(art, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	case mcp.OutcomeApprovalRequired:
		s.mu.Lock()
		s.pending[ec.TaskID] = prop
		s.mu.Unlock()
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, approvalRequestMessage(ec, res.Approval)), nil)
	default:
		s.forget(ec.TaskID)
		reason := string(res.Outcome)
		if res.Err != nil {
			reason += ": " + res.Err.Error()
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, fmt.Sprintf("Tool %s ended %s", s.tool, reason))), nil)
	}
}

// run calls the pipeline while yielding the tool's progress notifications
// as working status updates, from this goroutine: the pipeline reports
// progress on its own. ok is false when the consumer stopped.
func (s *Tool) run(ctx context.Context, ec *a2asrv.ExecutorContext, prop mcp.Proposal, approval *mcp.Approval,
	yield func(a2a.Event, error) bool) (mcp.PipelineResult, bool) {
	type progress struct {
		done, total float64
		msg         string
	}
	updates := make(chan progress, 16)
	prop.Progress = func(done, total float64, msg string) {
		select {
		case updates <- progress{done, total, msg}:
		default: // the consumer is behind: skip a step rather than stall the call
		}
	}
	result := make(chan mcp.PipelineResult, 1)
	go func() { result <- s.pipeline.Run(ctx, prop, approval) }()
	for {
		select {
		case p := <-updates:
			text := p.msg
			if text == "" {
				text = fmt.Sprintf("%s: %g", s.tool, p.done)
				if p.total > 0 {
					text += fmt.Sprintf(" of %g", p.total)
				}
			}
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec, text)), nil) {
				<-result // the call ends with ctx, which the engine cancels
				return mcp.PipelineResult{}, false
			}
		case r := <-result:
			return r, true
		}
	}
}

// Cancel implements [a2asrv.AgentExecutor]; the engine cancels Execute's
// context, which cancels the tool call.
func (s *Tool) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		s.forget(ec.TaskID)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// waitForTool returns the catalog once it holds the tool, waiting a little
// while the servers are still connecting (just after the agent started);
// after that the pipeline answers unavailable_tool.
func waitForTool(ctx context.Context, m *mcp.Manager, tool string) *mcp.Snapshot {
	deadline := time.NewTimer(toolWait)
	defer deadline.Stop()
	for {
		updated := m.Updated()
		snap := m.Snapshot()
		if snap != nil {
			if _, ok := snap.Tool(tool); ok {
				return snap
			}
		}
		select {
		case <-updated:
		case <-deadline.C:
			return snap
		case <-ctx.Done():
			return snap
		}
	}
}

// toolWait bounds how long a call waits for its tool to appear.
const toolWait = 10 * time.Second

// GateTools runs the acceptance gate's verifier calls through m's governed
// pipeline, as the agent itself: a verifier tool needs a contract that
// allows it (read, low risk), like any other call. Without MCP servers (m
// nil) every verifier call fails.
func GateTools(m *MCP) acceptance.ToolRunner {
	if m == nil {
		return noTools{}
	}
	return verifierTools{p: m.Pipeline, m: m.Manager}
}

type verifierTools struct {
	p *mcp.Pipeline
	m *mcp.Manager
}

func (v verifierTools) RunTool(ctx context.Context, tool string, args map[string]any) (any, error) {
	prop := mcp.Proposal{TaskID: "acceptance-gate", Principal: "handoff:gate", Tool: tool, Arguments: args}
	if snap := waitForTool(ctx, v.m, tool); snap != nil {
		prop.SnapshotVersion = snap.Version
	}
	res := v.p.Run(ctx, prop, nil)
	if res.Outcome != mcp.OutcomeSuccess {
		return nil, fmt.Errorf("verifier tool %s: %s", tool, res.Outcome)
	}
	return res.StructuredContent, nil
}

// noTools answers verifier calls when the agent has no MCP servers.
type noTools struct{}

func (noTools) RunTool(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("this agent has no MCP tools for verifiers")
}

func (s *Tool) forget(id a2a.TaskID) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// Redact implements [tasks.Redactor]: the message that starts a task is kept
// with the arguments its tool's contract redacts replaced by [mcp.Redacted],
// in the part they were read from (see arguments). When the catalog does not
// hold the tool yet, its text is kept redacted if the contract redacts
// anything, since it may become the one string argument. A message on an
// existing task (an approval) carries no arguments.
func (s *Tool) Redact(_ context.Context, ec *a2asrv.ExecutorContext) (*a2a.Message, error) {
	redact := s.pipeline.Contract(s.tool).Redact
	if ec.StoredTask != nil || len(redact) == 0 {
		return ec.Message, nil
	}
	m := *ec.Message
	m.Parts = slices.Clone(m.Parts)
	textAt := -1
	for i, p := range m.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			hidden := maps.Clone(d)
			for _, k := range redact {
				if _, ok := hidden[k]; ok {
					hidden[k] = mcp.Redacted
				}
			}
			m.Parts[i] = a2a.NewDataPart(hidden)
			m.Parts[i].Metadata = p.Metadata
			return &m, nil
		}
		if textAt < 0 && p.Text() != "" {
			textAt = i
		}
	}
	if textAt < 0 {
		return ec.Message, nil
	}
	if snap := s.manager.Snapshot(); snap != nil {
		if tool, ok := snap.Tool(s.tool); ok {
			name, ok := singleStringParam(tool.Definition.InputSchema)
			if !ok || !slices.Contains(redact, name) {
				return ec.Message, nil // the text is not a redacted argument
			}
		}
	}
	p := a2a.NewTextPart(mcp.Redacted)
	p.Metadata = m.Parts[textAt].Metadata
	m.Parts[textAt] = p
	return &m, nil
}

// arguments are the message's first data part, or, for a tool with one
// string parameter in snap, its text. A tool that is not in snap gets no
// arguments: the pipeline answers unavailable_tool, which says more than a
// complaint about the request's shape.
func (s *Tool) arguments(m *a2a.Message, snap *mcp.Snapshot) (map[string]any, error) {
	var text string
	for _, p := range m.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			return d, nil
		}
		if text == "" {
			text = p.Text()
		}
	}
	var tool *mcp.Tool
	if snap != nil {
		tool, _ = snap.Tool(s.tool)
	}
	if tool == nil {
		return map[string]any{}, nil
	}
	if name, ok := singleStringParam(tool.Definition.InputSchema); ok {
		return map[string]any{name: text}, nil
	}
	if noneRequired(tool.Definition.InputSchema) { // the text is just the request: no arguments
		return map[string]any{}, nil
	}
	return nil, fmt.Errorf("tool %s takes its arguments as a data part (a JSON object)", s.tool)
}

// noneRequired reports whether an object schema requires no property.
func noneRequired(schema any) bool {
	b, err := json.Marshal(schema)
	if err != nil {
		return false
	}
	var s struct {
		Required []string `json:"required"`
	}
	return json.Unmarshal(b, &s) == nil && len(s.Required) == 0
}

// singleStringParam reports the name of the only property of an object
// schema, when that property is a string.
func singleStringParam(schema any) (string, bool) {
	b, err := json.Marshal(schema)
	if err != nil {
		return "", false
	}
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil || len(s.Properties) != 1 {
		return "", false
	}
	for name, p := range s.Properties {
		return name, p.Type == "string"
	}
	return "", false
}

// approvalFrom reads an approval from the message's data parts, with the
// approver being the authenticated caller who sent it.
func approvalFrom(ec *a2asrv.ExecutorContext) *mcp.Approval {
	a := approvalData(ec.Message)
	if a == nil {
		return nil
	}
	str := func(k string) string { v, _ := a[k].(string); return v }
	// A scope wider than once becomes a grant; an expiry that does not parse
	// leaves it zero, which the pipeline refuses for a scope grant.
	expires, _ := time.Parse(time.RFC3339, str("expires"))
	return &mcp.Approval{Approver: principalOf(ec), Tool: str("tool"), SnapshotVersion: str("snapshot_version"),
		Digest: str("digest"), Token: str("token"), Scope: policy.Scope(str("scope")), Resource: str("resource"), Expires: expires}
}

// denialFrom reads a denial from the message's data parts: an approval
// object whose decision is "deny" (it carries no token: see [mcp.Denial]),
// with the denier being the authenticated caller who sent it.
func denialFrom(ec *a2asrv.ExecutorContext) *mcp.Denial {
	a := approvalData(ec.Message)
	if d, _ := a["decision"].(string); d != ApprovalDeny {
		return nil
	}
	reason, _ := a["reason"].(string)
	return &mcp.Denial{Approver: principalOf(ec), Reason: reason}
}

// ApprovalDeny is the decision member of an approval object that denies.
const ApprovalDeny = "deny"

// approvalData is the first {"approval": {...}} object of m's data parts.
func approvalData(m *a2a.Message) map[string]any {
	for _, p := range m.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			if a, ok := d[ApprovalKey].(map[string]any); ok {
				return a
			}
		}
	}
	return nil
}

// Approval implements [tasks.ApprovalReader] (see approvalDecision).
func (s *Tool) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	return approvalDecision(ec)
}

// approvalRequestMessage is the input-required status message of a call
// that needs an approval: the reason, and the request an approver answers.
func approvalRequestMessage(ec *a2asrv.ExecutorContext, req *mcp.ApprovalRequest) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec,
		a2a.NewTextPart(fmt.Sprintf("Tool %s needs an approval: %s", req.Tool, req.Reason)),
		a2a.NewDataPart(map[string]any{ApprovalRequestKey: map[string]any{
			"tool": req.Tool, "snapshot_version": req.SnapshotVersion,
			"digest": req.Digest, "token": req.Token, "arguments": req.Arguments,
		}}))
}

// approvalDecision is the approval decision ec.Message carries: its
// approval object, with the members an approval has, in a data part of its
// own; nil when it carries none.
func approvalDecision(ec *a2asrv.ExecutorContext) *a2a.Message {
	a := approvalData(ec.Message)
	if a == nil {
		return nil
	}
	kept := map[string]any{}
	for _, k := range []string{"tool", "snapshot_version", "digest", "token", "decision", "reason", "scope", "resource", "expires"} {
		if v, ok := a[k].(string); ok {
			kept[k] = v
		}
	}
	return a2a.NewMessageForTask(a2a.MessageRoleUser, ec, a2a.NewDataPart(map[string]any{ApprovalKey: kept}))
}

// principalOf is the authenticated caller's name, empty for anonymous ones.
func principalOf(ec *a2asrv.ExecutorContext) string {
	if ec.User != nil && ec.User.Authenticated {
		return ec.User.Name
	}
	return ""
}

// tenantOf is the tenant the caller of ec is bound to: its credential's,
// else the request's.
func tenantOf(ec *a2asrv.ExecutorContext) string {
	if ec.User != nil {
		if t, _ := ec.User.Attributes[tasks.TenantAttribute].(string); t != "" {
			return t
		}
	}
	return ec.Tenant
}

func agentText(ec *a2asrv.ExecutorContext, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
}

// scrubValue is v with scrub applied to every string inside it, keys too.
func scrubValue(v any, scrub func(string) string) any {
	switch v := v.(type) {
	case string:
		return scrub(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[scrub(k)] = scrubValue(e, scrub)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = scrubValue(e, scrub)
		}
		return out
	}
	return v
}

// textOf joins the text items of a tool's content.
func textOf(content []mcpsdk.Content) string {
	var out string
	for _, c := range content {
		if t, ok := c.(*mcpsdk.TextContent); ok {
			if out != "" {
				out += "\n"
			}
			out += t.Text
		}
	}
	return out
}
