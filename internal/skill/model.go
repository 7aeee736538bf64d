package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/model"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/tasks"
)

// ModelSpec is a model skill as the root builds it from the config.
type ModelSpec struct {
	// Model is the endpoint's client.
	Model model.Completer
	// Config is the skill's model section, its instructions already read.
	Config model.SkillConfig
	// Skills are the Agent Skills of its skills_dir.
	Skills []model.Skill
	// Descriptions describe the delegate skills it may call, by id, for
	// the model to choose by.
	Descriptions map[string]string
	// State keeps each task's conversation, out of the task's sight.
	State State
	// TurnBound is how long one model round trip may take, retries
	// included: the task may be quiet that long.
	TurnBound time.Duration
	// Output is the result's JSON Schema: the model finishes by calling
	// submit_result with it. Nil: the model's text answer is the result.
	Output json.RawMessage
	// Gated: the skill's output contract (in [Outbound.Results], under the
	// skill's id) decides on each submitted result, and a committed one
	// enters the ledger; a rejected one goes back to the model once.
	Gated bool
	// ApprovalWhen, when set, sends a submitted result that matches it to an
	// approver (one IsApprover accepts) before the gate and the task's end.
	ApprovalWhen *ApprovalWhen
	// IsApprover reports whether principal ("key:NAME", "jwt:ISSUER#SUBJECT")
	// may approve; nil: nobody may, so a result ApprovalWhen matches waits
	// for an approval that never counts.
	IsApprover func(principal string) bool
}

// Model fulfils a skill with a model loop ([model.Loop]) over the agent's
// MCP catalog and its delegate skills: the model proposes, and every call
// goes through the same roads as a Go executor's ([Caps.Call] and
// [Caps.Delegate]): the governed pipeline for tools, the envelope, follow
// and acceptance gate for delegations. The conversation is kept in
// [ModelSpec.State] after every step, so a restart continues the task at
// its last stored step, and an approval message continues the call that
// waited for it.
type Model struct {
	id        string
	spec      ModelSpec
	tools     *MCP                    // nil without mcp_servers
	out       *Outbound               // nil without peers
	delegates map[string]DelegateSpec // the delegate skills the model may call, by id

	// live holds each unfinished task's conversation as the loop has it,
	// redacted arguments included, which the stored copy masks: an approval
	// in this process continues the call with its real arguments. After a
	// restart only the stored copy is left (see modelCaller.Call).
	mu   sync.Mutex
	live map[a2a.TaskID][]byte
}

var (
	_ a2asrv.AgentExecutor = (*Model)(nil)
	_ tasks.Resumer        = (*Model)(nil)
	_ tasks.QuietBound     = (*Model)(nil)
	_ tasks.ApprovalReader = (*Model)(nil)
)

// NewModel returns the executor of the model skill id, with tools (nil in
// an agent without MCP servers) and delegations through out (nil without
// peers) to the delegate skills of delegates its config lists.
func NewModel(id string, spec ModelSpec, tools *MCP, out *Outbound, delegates map[string]DelegateSpec) *Model {
	listed := map[string]DelegateSpec{}
	for _, d := range spec.Config.Delegates {
		if s, ok := delegates[d]; ok {
			listed[d] = s
		}
	}
	return &Model{id: id, spec: spec, tools: tools, out: out, delegates: listed, live: map[a2a.TaskID][]byte{}}
}

// Execute implements [a2asrv.AgentExecutor]: a new task starts the
// conversation with the message's text; a message on a task waiting for
// an approval continues it from the call that waited.
func (x *Model) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			x.run(ctx, ec, nil, nil, yield)
			return
		}
		conv, err := x.load(ctx, ec.TaskID)
		if err != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The conversation could not be read: "+err.Error())), nil)
			return
		}
		if conv == nil || conv.Pending == nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
				"Nothing waits for approval on this task; send the request again as a new task.")), nil)
			return
		}
		if d := denialFrom(ec); d != nil && conv.Pending.Tool == model.NameSubmitResult && conv.Result != nil &&
			x.spec.IsApprover != nil && x.spec.IsApprover(d.Approver) {
			// A denied result ends the task as an output gate's refusal does: the model is not asked again.
			text := "Not committed: " + d.Approver + " denied the result"
			if d.Reason != "" {
				text += ": " + d.Reason
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, text)), nil)
			x.forget(ctx, ec.TaskID)
			return
		}
		approval := approvalFrom(ec)
		if approval == nil {
			msg := agentText(ec, "This task waits for an approval: a message with a data part {\"approval\": {...}} from an approver.")
			if req := pendingRequest(conv.Pending); req != nil {
				msg = approvalRequestMessage(ec, req)
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, msg), nil)
			return
		}
		x.run(ctx, ec, conv, approval, yield)
	}
}

// CanResume implements [tasks.Resumer]: every model task can be taken up;
// Resume fails the one whose conversation was never stored.
func (x *Model) CanResume(*a2a.Task) bool { return true }

// Resume implements [tasks.Resumer]: it continues the stored conversation
// at its last step. A write call that was started and has no outcome is not
// run again: the model is told its outcome is unknown (see modelCaller).
func (x *Model) Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		conv, err := x.load(ctx, ec.TaskID)
		if err != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The conversation could not be read: "+err.Error())), nil)
			return
		}
		if conv == nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
				"The agent restarted before the conversation was stored; send the request again.")), nil)
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec,
			fmt.Sprintf("The agent restarted; continuing after model turn %d.", conv.Turns))), nil) {
			return
		}
		x.run(ctx, ec, conv, nil, yield)
	}
}

// QuietFor implements [tasks.QuietBound]: a model turn may take its
// endpoint's timeout for every attempt, and a delegate tool its
// delegation's deadline.
func (x *Model) QuietFor(*a2asrv.ExecutorContext) time.Duration {
	d := x.spec.TurnBound
	for _, spec := range x.delegates {
		d = max(d, spec.Timeout+quietMargin)
	}
	return d
}

// Approval implements [tasks.ApprovalReader]: an approver's answer to the
// call the conversation waits on.
func (x *Model) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	return approvalDecision(ec)
}

// Cancel implements [a2asrv.AgentExecutor]; the engine cancels Execute's
// context, which cancels the model turn or the call in flight.
func (x *Model) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.forget(ctx, ec.TaskID)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// run starts (conv nil) or continues the conversation until it ends or
// waits, and turns its ending into the task's.
func (x *Model) run(ctx context.Context, ec *a2asrv.ExecutorContext, conv *model.Conversation, approval *mcp.Approval,
	yield func(a2a.Event, error) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := false
	emit := func(ev a2a.Event, err error) bool {
		if stopped {
			return false
		}
		if !yield(ev, err) {
			stopped = true
			cancel()
		}
		return !stopped
	}
	// The loop reports from this goroutine, between its steps: its lines
	// go into the task's log in order with everything else.
	progress := func(text string) { emit(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec, text)), nil) }
	opts := []model.Option{model.WithSkills(x.spec.Skills), model.WithProgress(progress)}
	if x.spec.Output != nil {
		opts = append(opts, model.WithOutputSchema(x.spec.Output))
	}
	loop, err := model.NewLoop(x.spec.Model, x.spec.Config, opts...)
	if err != nil {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The model skill is misconfigured: "+err.Error())), nil)
		return
	}
	caps := &Caps{skill: x.id, tools: x.tools, ec: ec, out: x.out, delegates: x.delegates, emit: emit}
	env := model.Env{
		Catalog: &modelCatalog{x: x, wait: conv == nil, principal: principalOf(ec), tenant: tenantOf(ec)},
		Caller:  &modelCaller{x: x, caps: caps, approval: approval},
		Saver:   newModelSaver(x, ec, conv),
	}
	if !emit(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
		return
	}
	var appr json.RawMessage
	if approval != nil {
		appr, _ = json.Marshal(approval)
	}
	if conv == nil {
		if conv, err = loop.Start(ctx, env, inputText(ec.Message)); err != nil {
			x.fail(ctx, ec, err, yield)
			return
		}
	}
	out, err := loop.Run(ctx, env, conv, appr)
	// A submitted result passes the output gate; a rejection goes back to
	// the model once, and the loop goes on from there.
	var committed string
	for err == nil && out.Status == model.StatusSubmitted && !stopped && !caps.stopped {
		var wait *model.Pending
		if wait, err = x.resultWaits(ctx, ec, conv, out.Result, approval); err != nil {
			break
		}
		if wait != nil {
			conv.Pending = wait
			if err = env.Saver.Save(ctx, conv); err != nil {
				break
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, approvalRequestMessage(ec, pendingRequest(wait))), nil)
			return
		}
		if conv.Pending != nil { // approved
			conv.Pending = nil
			if err = env.Saver.Save(ctx, conv); err != nil {
				break
			}
		}
		if !x.spec.Gated {
			break
		}
		var reasons []string
		// Keyed by the task's id: a restart that asks again finds the same ledger entry.
		if committed, reasons, err = gateResult(ctx, x.out, x.id, string(ec.TaskID), out.Result, nil); err != nil || reasons == nil {
			break
		}
		approval = nil // it approved the rejected result, not the next one
		if err = loop.Reject(ctx, env, conv, reasons); err == nil {
			out, err = loop.Run(ctx, env, conv, nil)
		}
	}
	if stopped || caps.stopped {
		return
	}
	if err != nil {
		x.fail(ctx, ec, err, yield)
		return
	}
	switch out.Status {
	case model.StatusNeedsApproval:
		msg := agentText(ec, "Tool "+out.Pending.Tool+" needs an approval.")
		if req := pendingRequest(out.Pending); req != nil {
			msg = approvalRequestMessage(ec, req)
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, msg), nil)
		return
	case model.StatusSubmitted:
		var v any
		_ = json.Unmarshal(out.Result, &v)
		art := a2a.NewArtifactEvent(ec, a2a.NewDataPart(v))
		art.Artifact.Name = resultArtifact
		if !yield(art, nil) {
			return
		}
		var msg *a2a.Message
		if committed != "" {
			msg = agentText(ec, committed)
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, msg), nil)
	default:
		art := a2a.NewArtifactEvent(ec, a2a.NewTextPart(out.Text))
		art.Artifact.Name = "answer"
		if !yield(art, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, agentText(ec, out.Text)), nil)
	}
	// The task's end is stored: its conversation is no longer needed.
	x.forget(ctx, ec.TaskID)
}

// resultWaits returns what a submitted result waits for when it matches
// the skill's approval_when and neither approval approves it (an
// approver's answer to its request: same digest and token) nor an earlier
// one did (its digest kept in the state, so that a restart between the
// approval and the task's end does not ask again), or nil.
func (x *Model) resultWaits(ctx context.Context, ec *a2asrv.ExecutorContext, conv *model.Conversation, result json.RawMessage, approval *mcp.Approval) (*model.Pending, error) {
	if x.spec.ApprovalWhen == nil {
		return nil, nil
	}
	var v any
	if json.Unmarshal(result, &v) != nil || !x.spec.ApprovalWhen.Match(ctx, v) {
		return nil, nil
	}
	reason := "the result matches approval_when: " + x.spec.ApprovalWhen.text
	req := resultApproval(string(ec.TaskID), result, reason)
	approved, err := x.spec.State.Load(ctx, approvedKey(ec.TaskID))
	if err != nil {
		return nil, err
	}
	if string(approved) == req.Digest {
		return nil, nil
	}
	if approval != nil && approval.Tool == req.Tool {
		if approval.Digest == req.Digest && approval.Token == req.Token && x.spec.IsApprover != nil && x.spec.IsApprover(approval.Approver) {
			if err := x.spec.State.Save(ctx, approvedKey(ec.TaskID), []byte(req.Digest)); err != nil {
				return nil, err
			}
			return nil, nil
		}
		req.Reason = "the approval does not match this result or does not come from an approver; " + reason
	}
	b, _ := json.Marshal(req)
	return &model.Pending{CallID: conv.ResultCall, Tool: req.Tool, Request: b}, nil
}

// approvedKey is where the digest of a task's approved result is kept.
func approvedKey(id a2a.TaskID) string { return "approved/" + string(id) }

// resultArtifact names a submitted result, in the task and in the output
// contract (its artifacts and evidence).
const resultArtifact = "result"

// fail ends the task failed with a status message saying which limit or
// which fault ended the loop; an agent that is stopping leaves the task
// working for its next start (the conversation is stored).
func (x *Model) fail(ctx context.Context, ec *a2asrv.ExecutorContext, err error, yield func(a2a.Event, error) bool) {
	if errors.Is(context.Cause(ctx), tasks.ErrShutdown) {
		return
	}
	var text string
	switch {
	case errors.Is(err, model.ErrMaxTurns):
		text = fmt.Sprintf("The model did not finish within max_turns (%d).", x.spec.Config.WithDefaults().MaxTurns)
	case errors.Is(err, model.ErrNoChoices):
		text = "The model answered with no choices."
	case errors.Is(err, model.ErrNoResult):
		text = "The model answered without calling submit_result."
	case errors.Is(err, model.ErrNotCommitted):
		text = "Not committed: " + strings.TrimPrefix(err.Error(), model.ErrNotCommitted.Error()+": ")
	default:
		text = "The model skill failed: " + err.Error()
	}
	yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, text)), nil)
	x.forget(ctx, ec.TaskID)
}

// forget drops an ended task's conversation.
func (x *Model) forget(ctx context.Context, id a2a.TaskID) {
	x.mu.Lock()
	delete(x.live, id)
	x.mu.Unlock()
	_ = x.spec.State.Delete(context.WithoutCancel(ctx), stateKey(id))
	_ = x.spec.State.Delete(context.WithoutCancel(ctx), approvedKey(id))
}

// load reads the task's stored conversation; nil when there is none.
func (x *Model) load(ctx context.Context, id a2a.TaskID) (*model.Conversation, error) {
	x.mu.Lock()
	b := x.live[id]
	x.mu.Unlock()
	if b == nil {
		var err error
		if b, err = x.spec.State.Load(ctx, stateKey(id)); err != nil || b == nil {
			return nil, err
		}
	}
	var c model.Conversation
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode conversation of task %s: %w", id, err)
	}
	return &c, nil
}

// stateKey is where a task's conversation is kept.
func stateKey(id a2a.TaskID) string { return "model/" + string(id) }

// modelSaver stores a task's conversation, and audits each call the loop
// refused as outside the skill's tools (the pipeline never saw it) when its
// refusal is first saved: the audit then shows what the model tried.
type modelSaver struct {
	state     State
	key       string
	audit     mcp.AuditLog // nil: no audit
	task      string
	principal string
	// ended are the calls whose outcome is stored already.
	ended map[string]bool
	// redact names a tool's arguments its contract redacts; nil without tools.
	redact func(tool string) []string
	// live keeps the unmasked conversation in this process; nil: none.
	live func([]byte)
}

func newModelSaver(x *Model, ec *a2asrv.ExecutorContext, conv *model.Conversation) *modelSaver {
	s := &modelSaver{state: x.spec.State, key: stateKey(ec.TaskID), task: string(ec.TaskID), principal: principalOf(ec), ended: map[string]bool{}}
	if tools := x.tools; tools != nil {
		s.live = func(b []byte) { x.mu.Lock(); x.live[ec.TaskID] = b; x.mu.Unlock() }
		s.audit = tools.Audit
		s.redact = func(tool string) []string { return tools.Pipeline.Contract(tool).Redact }
	}
	if conv != nil {
		for _, c := range conv.Calls {
			if c.Outcome != nil {
				s.ended[c.ID] = true
			}
		}
	}
	return s
}

func (s *modelSaver) Save(ctx context.Context, c *model.Conversation) error {
	for _, rec := range c.Calls {
		if rec.Outcome == nil || s.ended[rec.ID] {
			continue
		}
		s.ended[rec.ID] = true
		// The loop's own refusal has no arguments: it came before validation. A tool that left
		// the catalog is refused by the pipeline, which audits it itself.
		if s.audit != nil && rec.Outcome.ErrorClass == model.ClassUnavailableTool && len(rec.Arguments) == 0 {
			// Before the save: a crash between the two audits the refusal twice, never not at all.
			ar := &mcp.AuditRecord{Time: time.Now().UTC(), TaskID: s.task, Principal: s.principal, Tool: rec.Name,
				SnapshotVersion: c.Snapshot, Decision: mcp.DecisionDeny, Outcome: mcp.OutcomeUnavailableTool,
				Reason: "the model skill does not show this tool (outside its tools globs)"}
			if err := s.audit.Append(context.WithoutCancel(ctx), ar); err != nil {
				return fmt.Errorf("audit refused call %s: %w", rec.Name, err)
			}
		}
	}
	if s.live != nil {
		b, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("encode conversation: %w", err)
		}
		s.live(b)
	}
	b, err := json.Marshal(s.redacted(c))
	if err != nil {
		return fmt.Errorf("encode conversation: %w", err)
	}
	return s.state.Save(ctx, s.key, b)
}

// redacted is c as it may be stored: the values of the arguments a tool's
// contract redacts replaced by [mcp.Redacted] in the model's calls and
// their records, as the engine keeps a tool skill's message (see
// [Tool.Redact]). The running loop keeps the real values; a run resumed
// from the store sees its own earlier calls masked. A tool's result is
// stored as the pipeline scrubbed it ([ToolResult]).
func (s *modelSaver) redacted(c *model.Conversation) *model.Conversation {
	if s.redact == nil {
		return c
	}
	out := *c
	out.Messages = slices.Clone(c.Messages)
	for i, m := range out.Messages {
		if len(m.ToolCalls) == 0 {
			continue
		}
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for j, tc := range m.ToolCalls {
			name, args := tc.Name, tc.Arguments
			if name == model.NameCallTool { // the wrapped call's arguments
				var w struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				}
				if json.Unmarshal([]byte(args), &w) == nil {
					if masked, ok := mask(w.Arguments, s.redact(w.Name)); ok {
						w.Arguments = masked
						b, _ := json.Marshal(w)
						m.ToolCalls[j].Arguments = string(b)
					}
				}
				continue
			}
			if masked, ok := mask(json.RawMessage(args), s.redact(name)); ok {
				m.ToolCalls[j].Arguments = string(masked)
			}
		}
		out.Messages[i] = m
	}
	out.Calls = slices.Clone(c.Calls)
	for i, rec := range out.Calls {
		if masked, ok := mask(rec.Arguments, s.redact(rec.Name)); ok {
			out.Calls[i].Arguments = masked
		}
	}
	return &out
}

// mask replaces the named top-level members of the JSON object args; ok is
// false when there was nothing to replace.
func mask(args json.RawMessage, names []string) (json.RawMessage, bool) {
	if len(names) == 0 || len(args) == 0 {
		return nil, false
	}
	var obj map[string]any
	if json.Unmarshal(args, &obj) != nil {
		return nil, false
	}
	changed := false
	for _, n := range names {
		if _, ok := obj[n]; ok {
			obj[n], changed = mcp.Redacted, true
		}
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(obj)
	return b, err == nil
}

// modelCatalog is the catalog a model task plans against: the MCP
// manager's current snapshot (the one the tool skill and the pipeline
// use) less the tools the policy forbids the caller whatever the
// arguments (its entitlements), each tool classified by its local
// contract, and the listed delegate skills.
type modelCatalog struct {
	x *Model
	// wait: the task's first snapshot waits a little for the servers to
	// connect (just after the agent started), as a tool skill's call does.
	wait bool
	// principal and tenant are the task's caller, whose entitlements the
	// tools are intersected with.
	principal, tenant string
}

// delegateSchema is a delegate tool's parameters: the request for the peer.
var delegateSchema = json.RawMessage(`{"type":"object","properties":{"message":{"type":"string","description":"the request for the peer, in full"}},"required":["message"]}`)

func (k *modelCatalog) Snapshot(ctx context.Context) (model.Snapshot, error) {
	var out model.Snapshot
	if t := k.x.tools; t != nil {
		var snap *mcp.Snapshot
		if k.wait {
			snap = waitForMatch(ctx, t.Manager, k.x.spec.Config.Tools)
			k.wait = false
		} else {
			snap = t.Manager.Snapshot()
		}
		if snap != nil {
			out.Version = snap.Version
			for _, tool := range snap.Tools {
				if !matchesAny(k.x.spec.Config.Tools, tool.Name) { // invisible anyway: skip its schema
					continue
				}
				if _, no := t.Pipeline.Forbidden(mcp.Proposal{Principal: k.principal, Tenant: k.tenant, Skill: k.x.id, Tool: tool.Name}); no {
					continue // not the caller's to use: never shown, and a call of it is unavailable_tool
				}
				ct := t.Pipeline.Contract(tool.Name)
				mt := model.Tool{Name: tool.Name, Risk: string(ct.Risk), ReadOnly: ct.Effect == mcp.EffectRead, Tags: ct.Tags}
				if d := tool.Definition; d != nil {
					mt.Description = d.Description
					if d.InputSchema != nil {
						schema, err := json.Marshal(d.InputSchema)
						if err != nil {
							return model.Snapshot{}, fmt.Errorf("tool %s: input schema: %w", tool.Name, err)
						}
						mt.InputSchema = schema
					}
				}
				out.Tools = append(out.Tools, mt)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(k.x.delegates)) {
		out.Tools = append(out.Tools, model.Tool{Name: id, Description: k.x.spec.Descriptions[id], InputSchema: delegateSchema, Delegate: true})
	}
	return out, nil
}

// waitForMatch returns the catalog once a tool matches one of globs,
// waiting a little while the servers are still connecting.
func waitForMatch(ctx context.Context, m *mcp.Manager, globs []string) *mcp.Snapshot {
	deadline := time.NewTimer(toolWait)
	defer deadline.Stop()
	for {
		updated := m.Updated()
		snap := m.Snapshot()
		if len(globs) == 0 || (snap != nil && slices.ContainsFunc(snap.Tools, func(t *mcp.Tool) bool { return matchesAny(globs, t.Name) })) {
			return snap
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

func matchesAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// modelCaller runs the model's calls as the task's caller: catalog tools
// through [Caps.Call] (the governed pipeline), delegate tools through
// [Caps.Delegate]'s road (envelope, follow, acceptance gate).
type modelCaller struct {
	x    *Model
	caps *Caps
	// approval is the approver's answer this execution carries, for the
	// call that waited for it.
	approval *mcp.Approval
}

// ClassUnknownOutcome is the error class of a write call that was started
// before a restart and has no stored outcome.
const ClassUnknownOutcome = "unknown_outcome"

func (k *modelCaller) Call(ctx context.Context, c model.Call) (model.Observation, error) {
	if c.Tool.Delegate {
		return k.delegate(ctx, c)
	}
	if c.Resumed {
		// The pipeline cannot tell whether a write that was in flight at a
		// kill ran (its audit record is written after the call), so it is
		// not run blindly again: the model hears the truth and decides.
		return model.Observation{Status: model.ObservationError, ErrorClass: ClassUnknownOutcome,
			Error: "the agent restarted while this call was running: it may or may not have taken effect; check before calling it again"}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(c.Arguments, &args); err != nil {
		return model.Observation{Status: model.ObservationError, ErrorClass: model.ClassValidationFailed, Error: "arguments are not a JSON object"}, nil
	}
	if k.x.tools != nil {
		for _, name := range k.x.tools.Pipeline.Contract(c.Tool.Name).Redact {
			if args[name] == mcp.Redacted {
				// Only the masked copy survived a restart: never run a call with the placeholder.
				return model.Observation{Status: model.ObservationError, ErrorClass: model.ClassValidationFailed,
					Error: "the value of " + name + " is not kept across a restart of the agent; ask for it again"}, nil
			}
		}
	}
	k.caps.approval = nil
	if c.Approval != nil {
		k.caps.approval = k.approval
	}
	res, err := k.caps.Call(ctx, c.Tool.Name, args)
	var wait *ApprovalRequiredError
	if errors.As(err, &wait) {
		req, _ := json.Marshal(wait.Request)
		return model.Observation{}, &model.ApprovalError{Request: req}
	}
	if err != nil {
		return model.Observation{}, err
	}
	return toolObservation(res), nil
}

// toolObservation is what the model sees of a governed call: its outcome
// and its structured result (or its text), never the raw MCP payload.
func toolObservation(res *ToolResult) model.Observation {
	if res.Outcome != mcp.OutcomeSuccess {
		obs := model.Observation{Status: model.ObservationError, ErrorClass: string(res.Outcome)}
		if res.Err != nil {
			obs.Error = res.Err.Error()
		}
		return obs
	}
	var out any = res.Text
	if res.StructuredContent != nil {
		out = res.StructuredContent
	}
	b, err := json.Marshal(out)
	if err != nil {
		return model.Observation{Status: model.ObservationError, ErrorClass: model.ClassValidationFailed, Error: "the result cannot be encoded"}
	}
	return model.Observation{Status: model.ObservationSuccess, Output: b}
}

// delegate runs a delegate tool's whole delegation, keyed by the call's id
// (so a run resumed after a restart reaches the peer's task it started),
// and shows the model the gate's decision: the committed evidence, or the
// reasons, never the peer's own claim.
func (k *modelCaller) delegate(ctx context.Context, c model.Call) (model.Observation, error) {
	var a struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(c.Arguments, &a); err != nil || strings.TrimSpace(a.Message) == "" {
		return model.Observation{Status: model.ObservationError, ErrorClass: model.ClassValidationFailed, Error: "a delegate takes {\"message\": \"...\"}"}, nil
	}
	if k.caps.out == nil {
		return model.Observation{Status: model.ObservationError, ErrorClass: "unavailable_delegate", Error: "this agent has no peers"}, nil
	}
	d, err := k.caps.delegate(ctx, c.Tool.Name, k.x.delegates[c.Tool.Name], c.ID, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(a.Message)))
	if err != nil {
		return model.Observation{}, err
	}
	body := map[string]any{"decision": d.Outcome.String(), "peer": d.Peer}
	if d.PeerTaskID != "" {
		body["peer_task_id"] = d.PeerTaskID
	}
	if d.Outcome != acceptance.Committed { // the reasons are the error; the peer's claim is not shown
		b, _ := json.Marshal(body)
		return model.Observation{Status: model.ObservationError, ErrorClass: "not_committed", Error: d.Reason, Output: b}, nil
	}
	body["reason"] = d.Reason
	var evidence []map[string]any
	for _, art := range d.Artifacts {
		e := map[string]any{"name": art.Name}
		var parts []any
		for _, p := range art.Parts {
			switch {
			case p.Data() != nil:
				parts = append(parts, p.Data())
			case p.Text() != "":
				parts = append(parts, p.Text())
			}
		}
		e["parts"] = parts
		evidence = append(evidence, e)
	}
	body["evidence"] = evidence
	b, err := json.Marshal(body)
	if err != nil {
		return model.Observation{Status: model.ObservationError, ErrorClass: model.ClassValidationFailed, Error: "the evidence cannot be encoded"}, nil
	}
	return model.Observation{Status: model.ObservationSuccess, Output: b}, nil
}

// pendingRequest is the approval request a waiting call stored, or nil.
func pendingRequest(p *model.Pending) *mcp.ApprovalRequest {
	if p == nil || len(p.Request) == 0 {
		return nil
	}
	var req mcp.ApprovalRequest
	if json.Unmarshal(p.Request, &req) != nil {
		return nil
	}
	return &req
}

// inputText is the message as the model reads it: its text parts, and
// each data part as JSON.
func inputText(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		if p == nil {
			continue
		}
		if d := p.Data(); d != nil {
			if b, err := json.Marshal(d); err == nil {
				parts = append(parts, string(b))
			}
			continue
		}
		if t := p.Text(); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}
