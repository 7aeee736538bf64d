package skill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/tasks"
)

// OutputSpec is the output gate of a go, mcp or delegate skill, as the
// root builds it from the config (a model skill's is in [ModelSpec]).
type OutputSpec struct {
	// Schema is the result's JSON Schema ([CompileOutputSchema]); nil
	// checks none.
	Schema *jsonschema.Resolved
	// Gated: the skill's output contract (in [Outbound.Results], under the
	// skill's id) decides on each result, and a committed one enters the
	// ledger.
	Gated bool
	// ApprovalWhen, when set, sends a result that matches it to an approver
	// (one IsApprover accepts) before the contract and the task's end.
	ApprovalWhen *ApprovalWhen
	// IsApprover reports whether principal may approve a result; nil:
	// nobody may.
	IsApprover func(principal string) bool
	// State keeps a result that waits for an approver, and the approval
	// once given, so that neither is lost to a restart. Required with
	// ApprovalWhen.
	State State
}

// ResultApprovedKey is the task metadata key of a result an approver
// approved: the result's digest. A task that has it and is still working
// after a restart is committed without asking the approver again.
const ResultApprovedKey = "handoff/result_approved"

// CompileOutputSchema resolves a skill's output schema.
func CompileOutputSchema(schema map[string]any) (*jsonschema.Resolved, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	return rs, nil
}

// Output gates the completions of another executor (a [Tool], [Program]
// or [Delegate]): the artifacts it yields are held back until its task
// completes, then its result (their first data part, else their text, else
// the completion's status text) is
// checked against the schema, sent to an approver when approval_when
// matches it, and decided on by the output contract. Only a result that
// passes reaches the task; one that does not fails it "Not committed" with
// the reasons. There is no model to send the reasons back to, so nothing
// is retried.
type Output struct {
	id   string
	x    a2asrv.AgentExecutor
	spec OutputSpec
	out  *Outbound // nil without peers and contracts
	// afterDelegation: x is a delegate skill, whose delegation holds the
	// task's id in the ledger already.
	afterDelegation bool
}

var (
	_ a2asrv.AgentExecutor = (*Output)(nil)
	_ tasks.Resumer        = (*Output)(nil)
	_ tasks.QuietBound     = (*Output)(nil)
	_ tasks.ApprovalReader = (*Output)(nil)
	_ tasks.Redactor       = (*Output)(nil)
)

// NewOutput returns the executor of skill id: x, its completions gated by
// spec, its contract decided by out's Results gate (out may be nil when
// spec has no contract).
func NewOutput(id string, x a2asrv.AgentExecutor, spec OutputSpec, out *Outbound) *Output {
	_, del := x.(*Delegate)
	return &Output{id: id, x: x, spec: spec, out: out, afterDelegation: del}
}

// ledgerID is the result's id in the ledger: the task's, or for a
// delegate skill, whose delegation took that, TASK#output. A restart that
// asks the gate again finds the same entry.
func (g *Output) ledgerID(id a2a.TaskID) string {
	if g.afterDelegation {
		return string(id) + delegationKeySep + "output"
	}
	return string(id)
}

// Execute implements [a2asrv.AgentExecutor]: x's events pass, except its
// artifacts and its completion, which wait for the gate. A message on a
// task whose result waits for an approver answers that request; any other
// goes to x.
func (g *Output) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask != nil {
			p, err := g.load(ctx, ec.TaskID)
			if err != nil {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The waiting result could not be read: "+err.Error())), nil)
				return
			}
			if p != nil {
				g.answer(ctx, ec, p, yield)
				return
			}
		}
		g.gated(ctx, ec, g.x.Execute(ctx, ec), yield)
	}
}

// CanResume implements [tasks.Resumer]: a task whose result was approved
// is committed; any other is x's to take up, when x can.
func (g *Output) CanResume(task *a2a.Task) bool {
	if _, ok := task.Metadata[ResultApprovedKey].(string); ok {
		return true
	}
	r, ok := g.x.(tasks.Resumer)
	return ok && r.CanResume(task)
}

// Resume implements [tasks.Resumer]: an approved result goes on to the
// contract without asking the approver again; otherwise x resumes, gated
// as in Execute.
func (g *Output) Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		p, err := g.load(ctx, ec.TaskID)
		if err != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The waiting result could not be read: "+err.Error())), nil)
			return
		}
		if p != nil && p.Approved {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec,
				"The agent restarted; committing the result "+p.Approver+" approved.")), nil) {
				return
			}
			g.commit(ctx, ec, p, yield)
			return
		}
		r, ok := g.x.(tasks.Resumer)
		if !ok {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec,
				"The agent restarted before the result was committed; send the request again.")), nil)
			return
		}
		g.gated(ctx, ec, r.Resume(ctx, ec), yield)
	}
}

// QuietFor implements [tasks.QuietBound] by x.
func (g *Output) QuietFor(ec *a2asrv.ExecutorContext) time.Duration {
	if q, ok := g.x.(tasks.QuietBound); ok {
		return q.QuietFor(ec)
	}
	return 0
}

// Approval implements [tasks.ApprovalReader]: an approver's answer, to
// the waiting result or to a call of x's.
func (g *Output) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	return approvalDecision(ec)
}

// Redact implements [tasks.Redactor] by x.
func (g *Output) Redact(ctx context.Context, ec *a2asrv.ExecutorContext) (*a2a.Message, error) {
	if r, ok := g.x.(tasks.Redactor); ok {
		return r.Redact(ctx, ec)
	}
	return ec.Message, nil
}

// Cancel implements [a2asrv.AgentExecutor]: a waiting result is dropped,
// and x cancels its own work.
func (g *Output) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	g.forget(ctx, ec.TaskID)
	return g.x.Cancel(ctx, ec)
}

// pendingResult is a completion held for the gate, as the state keeps it
// while an approver is asked.
type pendingResult struct {
	// Result is the result the approval request names.
	Result json.RawMessage `json:"result"`
	// Artifacts are x's artifacts, assembled.
	Artifacts []*a2a.Artifact `json:"artifacts"`
	// Text and Metadata are those of x's completion.
	Text     string         `json:"text,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Approved is set, with Approver, once an approver approved Result.
	Approved bool   `json:"approved,omitempty"`
	Approver string `json:"approver,omitempty"`
}

// outputKey is where a task's waiting result is kept.
func outputKey(id a2a.TaskID) string { return "output/" + string(id) }

func (g *Output) load(ctx context.Context, id a2a.TaskID) (*pendingResult, error) {
	if g.spec.State == nil {
		return nil, nil
	}
	b, err := g.spec.State.Load(ctx, outputKey(id))
	if err != nil || b == nil {
		return nil, err
	}
	var p pendingResult
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decode the waiting result of task %s: %w", id, err)
	}
	return &p, nil
}

func (g *Output) save(ctx context.Context, id a2a.TaskID, p *pendingResult) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode the waiting result: %w", err)
	}
	return g.spec.State.Save(ctx, outputKey(id), b)
}

func (g *Output) forget(ctx context.Context, id a2a.TaskID) {
	if g.spec.State != nil {
		_ = g.spec.State.Delete(context.WithoutCancel(ctx), outputKey(id))
	}
}

// gated passes events on, holding back the artifacts and the completion,
// which go to the gate.
func (g *Output) gated(ctx context.Context, ec *a2asrv.ExecutorContext, events iter.Seq2[a2a.Event, error], yield func(a2a.Event, error) bool) {
	var arts []*a2a.Artifact
	for ev, err := range events {
		if err != nil {
			if !yield(ev, err) {
				return
			}
			continue
		}
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			arts = addArtifact(arts, e)
			continue
		case *a2a.TaskStatusUpdateEvent:
			if e.Status.State == a2a.TaskStateCompleted {
				g.decide(ctx, ec, arts, messageText(e.Status.Message), e.Metadata, yield)
				return
			}
		case *a2a.Task:
			if e.Status.State == a2a.TaskStateCompleted { // a whole task at once: it is created working
				t := *e
				t.Artifacts, t.Status = nil, a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: e.Status.Timestamp}
				if !yield(&t, nil) {
					return
				}
				g.decide(ctx, ec, e.Artifacts, messageText(e.Status.Message), nil, yield)
				return
			}
		case *a2a.Message:
			// A message is no task: there is nothing to hold until the gate decides.
			yield(nil, a2a.NewError(a2a.ErrInvalidAgentResponse, "skill "+g.id+" has an output gate and answered with a message, not a task"))
			return
		}
		if !yield(ev, nil) {
			return
		}
	}
}

// addArtifact adds e's artifact to arts, appending its parts to an
// earlier chunk of the same artifact.
func addArtifact(arts []*a2a.Artifact, e *a2a.TaskArtifactUpdateEvent) []*a2a.Artifact {
	if e.Artifact == nil {
		return arts
	}
	for i, a := range arts {
		if a.ID != e.Artifact.ID {
			continue
		}
		c := *a
		if e.Append {
			c.Parts = append(append(a2a.ContentParts{}, a.Parts...), e.Artifact.Parts...)
		} else {
			c = *e.Artifact
		}
		arts[i] = &c
		return arts
	}
	c := *e.Artifact
	return append(arts, &c)
}

// decide takes a completion (x's artifacts, its status text and metadata)
// through the schema and approval_when, then commits it.
func (g *Output) decide(ctx context.Context, ec *a2asrv.ExecutorContext, arts []*a2a.Artifact, text string, meta map[string]any,
	yield func(a2a.Event, error) bool) {
	v := resultOf(arts)
	if v == nil && text != "" { // an executor that answers in its status message only
		v = text
	}
	result, err := json.Marshal(v)
	if err != nil {
		g.refuse(ctx, ec, meta, []string{"the result cannot be encoded: " + err.Error()}, yield)
		return
	}
	if g.spec.Schema != nil {
		if err := g.spec.Schema.Validate(v); err != nil {
			g.refuse(ctx, ec, meta, []string{"schema: " + err.Error()}, yield)
			return
		}
	}
	p := &pendingResult{Result: result, Artifacts: arts, Text: text, Metadata: meta}
	if aw := g.spec.ApprovalWhen; aw != nil && aw.Match(ctx, v) {
		// Kept before the request is shown: the approver's answer, in this
		// process or after a restart, finds the result it approves.
		if err := g.save(ctx, ec.TaskID, p); err != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The result could not be kept for its approver: "+err.Error())), nil)
			return
		}
		g.ask(ec, p, "", yield)
		return
	}
	g.commit(ctx, ec, p, yield)
}

// ask leaves the task input-required with the result's approval request;
// why, when set, says why an answer did not count.
func (g *Output) ask(ec *a2asrv.ExecutorContext, p *pendingResult, why string, yield func(a2a.Event, error) bool) {
	reason := "the result waits for an approver"
	if aw := g.spec.ApprovalWhen; aw != nil {
		reason = "the result matches approval_when: " + aw.text
	}
	req := resultApproval(string(ec.TaskID), p.Result, reason)
	if why != "" {
		req.Reason = why + "; " + req.Reason
	}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, approvalRequestMessage(ec, req))
	ev.Metadata = p.Metadata
	yield(ev, nil)
}

// answer takes a message on a task whose result waits for an approver: an
// approval of that result from an approver commits it, a denial from one
// fails the task, anything else leaves it waiting.
func (g *Output) answer(ctx context.Context, ec *a2asrv.ExecutorContext, p *pendingResult, yield func(a2a.Event, error) bool) {
	if p.Approved { // approved before a restart that stopped the commit
		g.commit(ctx, ec, p, yield)
		return
	}
	approver := func(principal string) bool { return g.spec.IsApprover != nil && g.spec.IsApprover(principal) }
	if d := denialFrom(ec); d != nil {
		if !approver(d.Approver) {
			g.ask(ec, p, "the denial does not come from an approver", yield)
			return
		}
		g.forget(ctx, ec.TaskID)
		text := "Not committed: " + d.Approver + " denied the result"
		if d.Reason != "" {
			text += ": " + d.Reason
		}
		ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, text))
		ev.Metadata = p.Metadata
		yield(ev, nil)
		return
	}
	a := approvalFrom(ec)
	if a == nil {
		g.ask(ec, p, "this task waits for an approval of its result (a data part {\"approval\": {...}} from an approver)", yield)
		return
	}
	req := resultApproval(string(ec.TaskID), p.Result, "")
	if a.Tool != req.Tool || a.Digest != req.Digest || a.Token != req.Token || !approver(a.Approver) {
		g.ask(ec, p, "the approval does not match this result or does not come from an approver", yield)
		return
	}
	p.Approved, p.Approver = true, a.Approver
	if err := g.save(ctx, ec.TaskID, p); err != nil {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The approval could not be kept: "+err.Error())), nil)
		return
	}
	// The task says so too: working with this mark, it is resumed after a
	// restart and committed without a second approval.
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, agentText(ec, "The result was approved by "+a.Approver+"."))
	ev.Metadata = map[string]any{ResultApprovedKey: req.Digest}
	if !yield(ev, nil) {
		return
	}
	g.commit(ctx, ec, p, yield)
}

// commit asks the output contract about the result (when the skill has
// one) and ends the task: completed with x's artifacts, or failed with the
// reasons.
func (g *Output) commit(ctx context.Context, ec *a2asrv.ExecutorContext, p *pendingResult, yield func(a2a.Event, error) bool) {
	text := p.Text
	if g.spec.Gated {
		committed, reasons, err := gateResult(ctx, g.out, g.id, g.ledgerID(ec.TaskID), p.Result, p.Artifacts)
		if err != nil {
			if errors.Is(context.Cause(ctx), tasks.ErrShutdown) {
				return // an approved result is committed at the next start; the state keeps it
			}
			g.forget(ctx, ec.TaskID)
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "The result was not committed: "+err.Error())), nil)
			return
		}
		if reasons != nil {
			g.refuse(ctx, ec, p.Metadata, reasons, yield)
			return
		}
		text = strings.TrimSpace(text + " " + committed)
	}
	for _, art := range p.Artifacts {
		ev := &a2a.TaskArtifactUpdateEvent{TaskID: ec.TaskID, ContextID: ec.ContextID, Artifact: art, LastChunk: true}
		if !yield(ev, nil) {
			return
		}
	}
	var msg *a2a.Message
	if text != "" {
		msg = agentText(ec, text)
	}
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, msg)
	ev.Metadata = p.Metadata
	if yield(ev, nil) {
		g.forget(ctx, ec.TaskID)
	}
}

// refuse fails the task "Not committed" with the reasons.
func (g *Output) refuse(ctx context.Context, ec *a2asrv.ExecutorContext, meta map[string]any, reasons []string, yield func(a2a.Event, error) bool) {
	g.forget(ctx, ec.TaskID)
	ev := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, agentText(ec, "Not committed: "+strings.Join(reasons, "; ")))
	ev.Metadata = meta
	yield(ev, nil)
}

// resultOf is the result a gate reads of a completion's artifacts: their
// first data part, else their text joined, in JSON's types (numbers are
// float64, as the gate and CEL read them after a restart too).
func resultOf(arts []*a2a.Artifact) any {
	var texts []string
	for _, a := range arts {
		for _, p := range a.Parts {
			if p == nil {
				continue
			}
			if d := p.Data(); d != nil {
				var v any
				if b, err := json.Marshal(d); err == nil && json.Unmarshal(b, &v) == nil {
					return v
				}
				return d
			}
			if t := p.Text(); t != "" {
				texts = append(texts, t)
			}
		}
	}
	if texts == nil {
		return nil
	}
	return strings.Join(texts, "\n")
}

// gateResult asks the Results gate of out about a skill's result, as the
// skill's own completion keyed id in the ledger. The contract reads the
// result as the artifact "result" and the task's other artifacts by their
// names. It returns the status text of a commit, or the reasons of a
// refusal; an error means the gate could not decide.
func gateResult(ctx context.Context, out *Outbound, skill, id string, result json.RawMessage, arts []*a2a.Artifact) (string, []string, error) {
	if out == nil || out.Results == nil {
		return "", nil, errors.New("the output gate is not configured")
	}
	var v any
	if err := json.Unmarshal(result, &v); err != nil {
		return "", nil, fmt.Errorf("decode the result: %w", err)
	}
	given := []*a2a.Artifact{{ID: a2a.NewArtifactID(), Name: resultArtifact, Parts: a2a.ContentParts{a2a.NewDataPart(v)}}}
	for _, a := range arts {
		if a.Name != resultArtifact {
			given = append(given, a)
		}
	}
	d, err := out.Results.Decide(ctx, skill, acceptance.Completion{DelegationID: id, RemoteState: a2a.TaskStateCompleted, Artifacts: given})
	if err != nil {
		return "", nil, fmt.Errorf("the output gate could not decide: %w", err)
	}
	if d.Outcome == acceptance.Committed {
		return "Committed: the result passed the contract (" + reasons(d) + ").", nil, nil
	}
	var why []string
	for _, c := range d.Reasons {
		if !c.Passed {
			why = append(why, strings.TrimSuffix(c.Name+": "+c.Reason, ": "))
		}
	}
	if len(why) == 0 {
		why = []string{d.Outcome.String()}
	}
	return "", why, nil
}
