package mcp

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/handoff-a2a/handoff/internal/jcs"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// Decision is the policy's answer to a proposed call, from the layers of package
// [policy], highest first; the first layer with a matching rule decides:
//
//	immutable  a WithDeny glob, or a WithPolicy rule of layer immutable   deny
//	tenant     WithPolicy rules of layer tenant                           deny
//	resource   WithPolicy rules of layer resource; resources that cannot
//	           be made canonical (a path leaving its root)                deny
//	ask        contract Approval mandatory; rules of layer ask            ask
//	grant      a task or scope grant                                      allow
//	allow      contract Approval none (unless the tool is a high-risk
//	           destructive or external_send one); rules of layer allow    allow (or ask)
//	default    no contract matches the tool                               deny
//	           a read                                                     allow
//	           anything else                                              ask
//
// So with no rules configured the table is today's: a high-risk destructive or
// external_send tool is asked about even with approval none, and approval none allows the
// rest. A call that never reached the decision (unavailable tool, invalid arguments) is
// audited with no Decision.
type Decision string

const (
	// DecisionAllow: the call runs.
	DecisionAllow Decision = "allow"
	// DecisionDeny: the call never runs; it ends [OutcomePermissionDenied].
	DecisionDeny Decision = "deny"
	// DecisionAsk: the call runs only with a matching [Approval]; without one it ends
	// [OutcomeApprovalRequired].
	DecisionAsk Decision = "ask"
)

// Redacted replaces a redacted argument's value wherever the pipeline shows or stores text.
const Redacted = "[REDACTED]"

// Proposal is one tool call someone wants made.
type Proposal struct {
	// TaskID is the A2A task the call belongs to; approval tokens are bound to it.
	TaskID string
	// Principal is the authenticated A2A caller who asked.
	Principal string
	// Tenant is the caller's tenant, if its credential names one; policy rules on tenants
	// match only a call that carries it.
	Tenant string
	// Skill is the id of the skill the call serves, if any; rules on skills match only a
	// call that carries it.
	Skill string
	// Tool is the catalog name, server__tool.
	Tool string
	// SnapshotVersion is the catalog snapshot the call was planned against.
	SnapshotVersion string
	// Arguments are the tool's arguments; nil means {}.
	Arguments map[string]any
	// Progress, if set, receives the tool's progress notifications while the call runs, their
	// messages scrubbed of redacted values; see [CallRequest.Progress].
	Progress func(progress, total float64, message string)
}

// PipelineResult is the result of [Pipeline.Run]: the Manager's normalised [Result], plus
// what the policy decided and where it was recorded.
type PipelineResult struct {
	// Result is what the Manager returned, or the pipeline's own refusal (its Outcome and Err).
	Result
	// Decision is the policy's answer; empty when the call ended before the decision
	// (unavailable tool, invalid arguments).
	Decision Decision
	// Policy is the policy engine's whole decision: the deciding rule and layer, the policy
	// version, every rule that matched. Zero when the call ended before the decision.
	Policy policy.Decision
	// Digest is the argument digest (see [ApprovalRequest.Digest]); empty when the arguments
	// could not be canonicalised.
	Digest string
	// Approval is set when Outcome is [OutcomeApprovalRequired]: what to show the approver.
	Approval *ApprovalRequest
	// IdempotencyKey is the key the call carried (see [IdempotencyScope]); empty when it
	// carried none or never ran.
	IdempotencyKey string
	// AuditID names the call's [AuditRecord]. Empty when AuditErr is set.
	AuditID string
	// AuditErr says the record could not be stored. The call's outcome stands (it may have
	// run), so callers should treat this as an operational alarm, not a failed call.
	AuditErr error
	// Scrub replaces the values of the call's redacted arguments in text with [Redacted],
	// in every spelling the pipeline scrubs from its own reasons: for a caller that keeps or
	// shows what the tool returned, which may echo them. Nil when the arguments were never
	// canonicalised; it is not safe to keep, as it holds the values.
	Scrub func(string) string
}

// minKeyLen is the shortest approval key accepted: SHA-256's own block of security.
const minKeyLen = 32

// Pipeline governs every tool call: snapshot check, argument validation, canonical digest,
// local contract, policy decision, approval, execution through the [Manager], and one
// [AuditRecord] per call. Its methods are safe for concurrent use.
type Pipeline struct {
	m     *Manager
	audit AuditLog
	gov   atomic.Pointer[governance] // replaced whole by Reconfigure; each Run reads it once
}

// governance is what a config reload may change: the contracts, the policy rules and the
// options. A Run holds the one it started with to its end, so a call in flight finishes
// under the policy version it was decided by.
type governance struct {
	contracts contracts
	rules     *policy.Policy
	hooks     *hookRunner
	cfg       pipelineConfig
}

// NewPipeline returns a Pipeline that runs calls on m under contracts and records each in
// audit. Every problem with the contracts and options is reported at once.
func NewPipeline(m *Manager, contracts []Contract, audit AuditLog, opts ...PipelineOption) (*Pipeline, error) {
	var errs []error
	if m == nil {
		errs = append(errs, errors.New("tool pipeline: no Manager"))
	}
	if audit == nil { // an unaudited pipeline is not one: refuse rather than run blind
		errs = append(errs, errors.New("tool pipeline: no audit log"))
	}
	pol, err := newPolicy(contracts, nil, opts)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	p := &Pipeline{m: m, audit: audit}
	p.gov.Store(pol)
	return p, nil
}

// Reconfigure replaces the contracts and options, as a config reload does; calls already
// running finish under the old ones. The approval key stays unless opts set a new one, so
// that approvals requested before the reload still verify (against the new approvers). A
// set with any problem is refused whole, and nothing changes.
func (p *Pipeline) Reconfigure(contracts []Contract, opts ...PipelineOption) error {
	pol, err := newPolicy(contracts, p.gov.Load().cfg.key, opts)
	if err != nil {
		return err
	}
	p.gov.Store(pol)
	return nil
}

// newPolicy checks contracts and options; key is the approval key to keep when opts set
// none (nil: draw one).
func newPolicy(list []Contract, key []byte, opts []PipelineOption) (*governance, error) {
	c := newPipelineConfig(opts)
	var errs []error
	switch {
	case c.key != nil && len(c.key) < minKeyLen:
		errs = append(errs, fmt.Errorf("tool pipeline: approval key has %d bytes, want at least %d", len(c.key), minKeyLen))
	case c.key == nil && key != nil:
		c.key = key
	case c.key == nil:
		c.key = make([]byte, minKeyLen)
		_, _ = rand.Read(c.key) // crypto/rand.Read never fails
	}
	// WithDeny's globs are the first immutable rules: the binary's own denies.
	rules := make([]policy.Rule, 0, len(c.deny)+len(c.rules))
	for _, g := range c.deny {
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("tool pipeline: bad deny pattern %q: %v", g, err))
			continue
		}
		rules = append(rules, policy.Rule{ID: "deny:" + g, Layer: "immutable", Tools: []string{g}, Reason: "the tool is denied by policy"})
	}
	rules = append(rules, c.rules...)
	errs = append(errs, checkHooks(c.hooks, c.hookClient, pipelinePoints)...)
	cs, err := newContracts(list)
	if err != nil {
		errs = append(errs, err)
	}
	// The contracts decide too (effect, risk, approval, resources): their hash is part of
	// the policy version.
	extra, _ := json.Marshal(list) // strings, durations and JSON schemas: cannot fail
	engine, err := policy.New(rules, extra)
	if err != nil {
		errs = append(errs, fmt.Errorf("tool pipeline: policy: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &governance{contracts: cs, rules: engine, hooks: newHookRunner(c.hooks, c.hookClient, c.lookupEnv, c.logger), cfg: c}, nil
}

// Contract returns the contract that governs a catalog name: the exact one, else the longest
// matching glob (its Tool is then that glob), else [DefaultContract]. Empty fields are filled
// with the fail-closed defaults.
func (p *Pipeline) Contract(tool string) Contract {
	c := p.gov.Load().contracts.lookup(tool).Contract
	c.Redact = slices.Clone(c.Redact)
	c.Tags = slices.Clone(c.Tags)
	return c
}

// Forbidden reports whether the policy in force denies prop's caller the tool whatever the
// arguments ([policy.Policy.Forbids]), and the deciding rule's reason: the caller is not
// entitled to it. Only prop's Principal, Tenant, Skill and Tool are read.
func (p *Pipeline) Forbidden(prop Proposal) (reason string, forbidden bool) {
	gov := p.gov.Load()
	c := gov.contracts.lookup(prop.Tool)
	r, ok := gov.rules.Forbids(&policy.Call{Principal: prop.Principal, Tenant: prop.Tenant, Skill: prop.Skill, Tool: prop.Tool,
		Contracted: c.matched, Effect: string(c.Effect), Risk: string(c.Risk)})
	if !ok {
		return "", false
	}
	return cmp.Or(r.Reason, r.ID), true
}

// Run takes one proposed call through the whole pipeline and returns its terminal result. It
// never returns a Go error: every ending is an [Outcome], and every Run appends exactly one
// [AuditRecord], even when ctx is cancelled.
//
// approval is the approval carried by the message that resumed the task, or nil. It lets the
// call run only if its approver may approve ([WithApprovers]) and its tool, snapshot, digest and
// token match this proposal; otherwise the result is [OutcomeApprovalRequired] again, with a
// fresh request whose Reason says what did not match. An approval is not consumed: a Run with
// the same proposal and approval runs the call again, so the caller must resume a task once.
//
// Cancelling ctx (the A2A task was cancelled) cancels a running call, which ends
// [OutcomeCancelled].
func (p *Pipeline) Run(ctx context.Context, prop Proposal, approval *Approval) PipelineResult {
	start := time.Now()
	rec := &AuditRecord{
		Time:            start.UTC(),
		TaskID:          prop.TaskID,
		Principal:       prop.Principal,
		Tool:            prop.Tool,
		SnapshotVersion: prop.SnapshotVersion,
	}
	pol := p.gov.Load()
	var ev HookEvent // filled by run once the call is decided, for the observing hooks
	res := p.run(ctx, pol, prop, approval, rec, &ev)
	res.Tool, res.SnapshotVersion = prop.Tool, prop.SnapshotVersion
	if res.Duration == 0 {
		res.Duration = time.Since(start) // the Manager never ran: the pipeline's own time
	}
	rec.Decision, rec.ArgsDigest, rec.Outcome = res.Decision, res.Digest, res.Outcome
	rec.Duration = time.Since(start)

	// The record must be written even when the task was cancelled: that is when it matters.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pol.cfg.auditTimeout)
	defer cancel()
	if err := p.audit.Append(actx, rec); err != nil {
		res.AuditErr = fmt.Errorf("audit tool call %s of task %s: %w", prop.Tool, prop.TaskID, err)
	} else {
		res.AuditID = rec.ID
	}
	if ev.Tool != "" && len(pol.hooks.post) > 0 {
		ev.Point, ev.Outcome = HookPostToolCall, res.Outcome
		pol.hooks.observe(ctx, ev)
	}
	return res
}

// run is Run up to the audit record, which it fills with what only it knows.
func (p *Pipeline) run(ctx context.Context, pol *governance, prop Proposal, approval *Approval, rec *AuditRecord, ev *HookEvent) PipelineResult {
	stop := func(o Outcome, reason string) PipelineResult {
		rec.Reason = reason
		return PipelineResult{Result: Result{Outcome: o, Err: errors.New(reason)}}
	}
	tool, res, ok := p.m.resolve(CallRequest{Tool: prop.Tool, SnapshotVersion: prop.SnapshotVersion})
	if !ok {
		return stop(res.Outcome, res.Err.Error())
	}
	contract := pol.contracts.lookup(prop.Tool)
	args, plain, digest, err := canonicalise(prop.Tool, prop.Arguments)
	if err != nil {
		// The arguments could not be encoded, so no value of theirs is in err.
		return stop(OutcomeValidationFailed, fmt.Sprintf("arguments of %s: %v", prop.Tool, err))
	}
	scrub := newScrubber(contract.Redact, args)

	// Validation before the decision: a malformed call fails on its own, without asking
	// anyone to approve it. Schema errors quote values, hence the scrub.
	input, err := tool.inputSchema()
	if err != nil {
		r := stop(OutcomeValidationFailed, fmt.Sprintf("tool %s: unusable inputSchema: %v", prop.Tool, err))
		r.Digest = digest
		return r
	}
	if err := input.Validate(plain); err != nil {
		r := stop(OutcomeValidationFailed, scrub.text(fmt.Sprintf("arguments of %s: %v", prop.Tool, err)))
		r.Digest = digest
		return r
	}

	var grants []policy.Grant
	var grantsErr error
	if pol.cfg.grants != nil && prop.Principal != "" {
		gctx, cancel := context.WithTimeout(ctx, grantTimeout)
		grants, grantsErr = pol.cfg.grants.Grants(gctx, GrantFilter{Principal: prop.Principal, TaskID: prop.TaskID})
		cancel()
	}
	pd := pol.decide(prop, contract, plain, grants)
	rec.Rule, rec.Layer, rec.PolicyVersion, rec.Resources = pd.Rule, pd.Layer, pd.Version, pd.resources
	decision, why := Decision(pd.Verdict), scrub.text(pd.Reason)
	if grantsErr != nil && decision == DecisionAsk { // grants only widen: without them, ask
		why += "; the grants could not be read"
	}
	if len(pol.hooks.pre)+len(pol.hooks.post) > 0 {
		*ev = HookEvent{TaskID: prop.TaskID, Principal: prop.Principal, Tenant: prop.Tenant, Skill: prop.Skill, Tool: prop.Tool,
			Arguments: shown(args, contract.Redact), ArgsDigest: digest, Resources: pd.resources, Decision: pd.Decision}
	}
	if decision != DecisionDeny && len(pol.hooks.pre) > 0 {
		pre := *ev
		pre.Point = HookPreToolCall
		// A guard may make the answer stricter, never looser: deny beats ask beats allow.
		switch v, by, reason := pol.hooks.guard(ctx, pre); {
		case v == policy.Deny:
			decision, why, rec.Hook = DecisionDeny, scrub.text(reason), by
		case v == policy.Ask && decision == DecisionAllow:
			decision, why, rec.Hook = DecisionAsk, scrub.text(reason), by
		}
	}
	stop = func(o Outcome, reason string) PipelineResult {
		rec.Reason = reason
		return PipelineResult{Result: Result{Outcome: o, Err: errors.New(reason)}, Policy: pd.Decision}
	}
	switch decision {
	case DecisionDeny:
		r := stop(OutcomePermissionDenied, why)
		r.Decision, r.Digest = decision, digest
		return r
	case DecisionAsk:
		reason := why
		if approval != nil {
			if refused := pol.checkApproval(prop, digest, approval); refused != "" {
				reason = refused + "; " + why
			} else if refused := p.grant(ctx, pol, pd.Layer, prop, approval, rec); refused != "" {
				reason = refused + "; " + why
			} else {
				rec.Approver = approval.Approver
				reason = ""
			}
		}
		if reason != "" {
			r := stop(OutcomeApprovalRequired, reason)
			r.Decision, r.Digest = decision, digest
			r.Approval = &ApprovalRequest{
				Tool:            prop.Tool,
				SnapshotVersion: prop.SnapshotVersion,
				Digest:          digest,
				Token:           approvalToken(pol.cfg.key, prop.TaskID, prop.Tool, prop.SnapshotVersion, digest),
				Arguments:       shown(args, contract.Redact),
				Reason:          reason,
			}
			return r
		}
	}

	// The tool and arguments were resolved and validated above, against the same snapshot:
	// the call goes straight to the Manager's invoke rather than through Call, which would do
	// both again.
	key := idempotencyKey(contract.Idempotency, prop.TaskID, prop.Tool, digest)
	rec.IdempotencyKey = key
	progress := prop.Progress
	if progress != nil && len(scrub.values) > 0 { // a server's progress text may echo a redacted value
		progress = func(done, total float64, msg string) { prop.Progress(done, total, scrub.text(msg)) }
	}
	called := time.Now()
	var out Result
	if output, err := p.outputSchema(tool, contract); err != nil {
		out = fail(OutcomeValidationFailed, "tool %s: unusable output schema: %v", prop.Tool, err)
	} else {
		out = p.m.invoke(ctx, tool, args, output, CallRequest{
			Tool:           prop.Tool,
			Timeout:        contract.Timeout,
			ReadOnly:       contract.Effect == EffectRead,
			IdempotencyKey: key,
			Progress:       progress,
		})
	}
	out.Duration = time.Since(called)
	if out.Err != nil {
		out.Err = errors.New(scrub.text(out.Err.Error()))
		rec.Reason = out.Err.Error()
		if out.Outcome == OutcomeToolError {
			// The tool's explanation is part of its result, which the audit never holds.
			rec.Reason = "the tool reported an error"
		}
	}
	if out.Outcome == OutcomeSuccess || out.Outcome == OutcomeToolError {
		rec.ResultSHA256 = resultHash(out)
	}
	return PipelineResult{Result: out, Decision: decision, Policy: pd.Decision, Digest: digest, IdempotencyKey: key, Scrub: scrub.text}
}

// grant stores the grant an accepted approval wider than once makes, and says why it
// refuses one: without a store, for an ask a grant cannot answer (a mandatory one), or with
// a grant that does not check. Refusing the whole approval, rather than running the call
// once, keeps an approver from believing a grant stands that does not.
func (p *Pipeline) grant(ctx context.Context, pol *governance, layer policy.Layer, prop Proposal, a *Approval, rec *AuditRecord) string {
	g, err := grantFrom(a, prop, time.Now())
	switch {
	case err != nil:
		return "approval refused: " + err.Error()
	case g == nil:
		return ""
	case pol.cfg.grants == nil:
		return fmt.Sprintf("approval refused: this agent keeps no grants, so it can approve once only, not for a %s", a.Scope)
	case layer < policy.LayerGrant:
		return fmt.Sprintf("approval refused: this call needs an approval of its own every time (layer %s), so it cannot be approved for a %s", layer, a.Scope)
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grantTimeout)
	defer cancel()
	if err := pol.cfg.grants.PutGrant(gctx, *g); err != nil {
		return "approval refused: the grant could not be stored"
	}
	rec.Grant = g.ID
	return ""
}

// outputSchema is the contract's output schema if it has one, else the tool's own (nil if
// it declares none).
func (p *Pipeline) outputSchema(tool *Tool, c compiledContract) (*jsonschema.Resolved, error) {
	if c.output != nil {
		return c.output, nil
	}
	return tool.outputSchema()
}

// policyDecision is the engine's decision and the canonical resources it was made on.
type policyDecision struct {
	policy.Decision
	resources []policy.Resource
}

// decide asks the policy engine about one proposal under its contract (whose Tool may be
// the glob that matched it). plain is the canonical arguments with float64 numbers.
func (pol *governance) decide(prop Proposal, c compiledContract, plain any, grants []policy.Grant) policyDecision {
	args, _ := plain.(map[string]any)
	call := policy.Call{
		Principal: prop.Principal, Tenant: prop.Tenant, Skill: prop.Skill, TaskID: prop.TaskID, Tool: prop.Tool,
		Contracted: c.matched, Effect: string(c.Effect), Risk: string(c.Risk), Mandatory: c.Approval == ApprovalMandatory,
		Args: args, Grants: grants,
	}
	call.Resources, call.ResourceErr = policy.Extract(c.Resources, args)
	d := pol.rules.Decide(&call)
	if d.Verdict == policy.Ask && pol.cfg.isApprover == nil {
		d.Reason += ", and no principal may approve"
	}
	return policyDecision{Decision: d, resources: call.Resources}
}

// canonicalise encodes the arguments as RFC 8785 canonical JSON and digests
// {"arguments": …, "tool": …}. It returns the arguments in the two decoded forms of that
// canonical text: args keeps the canonical number text (json.Number), to be sent, so that
// what is sent is exactly what the digest (and so an approval) covers; plain holds numbers
// as float64, as the schema validator takes them. Subtrees without numbers are shared by
// both. JCS numbers are IEEE doubles: integers beyond 2^53 lose precision here, visibly,
// rather than between approval and execution.
func canonicalise(tool string, in map[string]any) (args map[string]any, plain any, digest string, err error) {
	if in == nil {
		in = map[string]any{}
	}
	buf, sent, plain, err := jcs.AppendCopies(append(make([]byte, 0, 256), `{"arguments":`...), in)
	if err != nil {
		return nil, nil, "", fmt.Errorf("canonicalise: %w", err)
	}
	buf = append(buf, `,"tool":`...)
	buf = jcs.AppendString(buf, jcs.ValidUTF8(tool))
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	return sent.(map[string]any), plain, hex.EncodeToString(sum[:]), nil
}

// shown is args as an approver may see them: redacted top-level values replaced.
func shown(args map[string]any, redact []string) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = v
	}
	for _, k := range redact {
		if _, ok := out[k]; ok {
			out[k] = Redacted
		}
	}
	return out
}

// scrubber removes redacted argument values from text. Errors quote values in several ways
// (schema errors use %v and %q, servers echo JSON), so every scalar inside a redacted value
// is replaced in its plain, quoted and JSON spellings.
type scrubber struct{ values []string }

func newScrubber(redact []string, args map[string]any) scrubber {
	var s scrubber
	for _, k := range redact {
		if v, ok := args[k]; ok {
			s.collect(v)
		}
	}
	return s
}

func (s *scrubber) collect(v any) {
	switch v := v.(type) {
	case string:
		if v == "" {
			return
		}
		js, _ := json.Marshal(v)
		s.values = append(s.values, strconv.Quote(v), string(js), v)
	case json.Number:
		// Validation sees the number as a float64 and prints it with %v: 1e+09, not 1000000000.
		s.values = append(s.values, v.String())
		if f, err := v.Float64(); err == nil {
			s.values = append(s.values, fmt.Sprint(f))
		}
	case map[string]any:
		for _, e := range v {
			s.collect(e)
		}
	case []any:
		for _, e := range v {
			s.collect(e)
		}
	}
	// Booleans and nulls carry one bit at most; replacing "true" everywhere would garble
	// every message without hiding anything.
}

func (s scrubber) text(t string) string {
	for _, v := range s.values { // quoted spellings first, so their quotes go too
		t = strings.ReplaceAll(t, v, Redacted)
	}
	return t
}

// resultHash is the hex SHA-256 of the canonical JSON of the tool's answer
// ({"content", "structuredContent"}), so an audit can prove what came back without holding it.
func resultHash(r Result) string {
	buf := append(make([]byte, 0, 512), `{"content":`...)
	buf, err := appendCanonicalContent(buf, r.Content)
	if err != nil {
		return ""
	}
	buf = append(buf, `,"structuredContent":`...)
	if buf, err = jcs.Append(buf, r.StructuredContent); err != nil {
		return ""
	}
	sum := sha256.Sum256(append(buf, '}'))
	return hex.EncodeToString(sum[:])
}
