package acceptance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoff-a2a/handoff/internal/jcs"
)

// clockSkew is how far in the future an observed_at may lie: peers' clocks drift a little, but
// a timestamp far ahead would keep evidence fresh forever.
const clockSkew = time.Minute

// A ToolRunner calls a local MCP tool. An error means the tool could not answer; the gate then
// decides [Unknown], never [Rejected]. RunTool must not modify args: their values are the
// evidence the gate goes on to digest.
type ToolRunner interface {
	RunTool(ctx context.Context, tool string, args map[string]any) (result any, err error)
}

// A Completion is what a peer claims when its task reaches a terminal state.
type Completion struct {
	// DelegationID identifies our delegation; the ledger is idempotent by it.
	DelegationID string
	// RemoteState is the peer's terminal state.
	RemoteState a2a.TaskState
	// RemoteMessage is the text of the peer's final status message, its own
	// reason for a failure ("card declined"); the gate quotes it, bounded.
	RemoteMessage string
	// Artifacts are the peer's artifacts, matched to the contract by Name. An artifact's data
	// is its first data part.
	Artifacts []*a2a.Artifact
	// Peer names the peer that completed (its name in the config); empty
	// for an agent's own results. Only the gate's span and observers
	// ([WithDecided]) see it, as they see RemoteTaskID.
	Peer string
	// RemoteTaskID is the peer's task; empty for an agent's own results.
	RemoteTaskID string
	// Attempt counts the decisions already made for this delegation: 0 the first time, 1 on
	// the first re-verification. The caller keeps it in its durable delegation record, so the
	// bound holds across restarts.
	Attempt int
	// Digests, when set, maps artifact names to the digests under which the caller's
	// content-addressed artifact store holds them (artifacts.Digest). The ledger entry records
	// these as the evidence digests, so each one names stored content; an artifact without
	// one gets the SHA-256 of its data.
	Digests map[string]string
}

// An Outcome is the gate's verdict on a completion.
type Outcome int

// The outcomes. Only Committed changes our state.
const (
	// Unknown: evidence is missing or a verifier could not answer. Decide again later.
	Unknown Outcome = iota
	// Committed: every check passed and the ledger holds the entry.
	Committed
	// Rejected: the evidence contradicts the contract or a verifier.
	Rejected
	// Failed: the peer itself failed, rejected or canceled the task.
	Failed
)

var outcomeNames = [...]string{Unknown: "unknown", Committed: "committed", Rejected: "rejected", Failed: "failed"}

// String returns the outcome's lower-case name, as ledgers and task status messages show it.
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// MarshalText writes the outcome's name, so records and JSON output read "rejected", not 2.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads a name MarshalText wrote, so a recorded decision reads back.
func (o *Outcome) UnmarshalText(text []byte) error {
	for i, name := range outcomeNames {
		if string(text) == name {
			*o = Outcome(i)
			return nil
		}
	}
	return fmt.Errorf("acceptance: unknown outcome %q", text)
}

// A Check is the result of one check of the contract. Reason is safe to show the peer: it
// describes the peer's evidence, never our tools' errors.
type Check struct {
	// Name says what was checked: "remote", "artifact NAME", "requires NAME#/POINTER",
	// "freshness NAME#/POINTER" or "verifier NAME".
	Name string `json:"name"`
	// Passed is true when the check holds.
	Passed bool `json:"passed"`
	// Reason says why a check did not pass; it is empty when it did.
	Reason string `json:"reason,omitempty"`
}

// A Decision is the gate's verdict with a reason per check.
type Decision struct {
	// Outcome is the verdict.
	Outcome Outcome `json:"outcome"`
	// Reasons holds every check made, in contract order, passed or not.
	Reasons []Check `json:"reasons"`
	// LedgerEntry is the committed entry, set only when Outcome is Committed. If the delegation
	// was committed before, it is that first entry.
	LedgerEntry *Entry `json:"ledger_entry,omitempty"`
	// Settle is true when no re-verification follows: always, except for an Unknown with
	// attempts left under [WithMaxReverify]. A settled Unknown is final.
	Settle bool `json:"settle"`
}

// Backoff returns how long to wait before re-verification number attempt (1 for the first):
// 1s doubling to a cap of 5m. No jitter: re-verifications are per delegation, not a herd.
func Backoff(attempt int) time.Duration {
	const base, ceiling = time.Second, 5 * time.Minute
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 20 { // past the ceiling already; stops the shift overflowing
		return ceiling
	}
	return min(base<<(attempt-1), ceiling)
}

// A Gate decides whether a peer's completion may change our state. It is safe for concurrent
// use.
type Gate struct {
	contracts map[string]*Contract
	ledger    Ledger
	tools     ToolRunner
	cfg       config
}

// NewGate returns a gate for the contracts, writing commits to ledger and running verifiers
// through tools. Both are required; a nil one panics. Two contracts for one skill are an error
// wrapping [ErrDuplicateSkill].
func NewGate(contracts []*Contract, ledger Ledger, tools ToolRunner, opts ...Option) (*Gate, error) {
	if ledger == nil || tools == nil {
		panic("acceptance: NewGate needs a ledger and a tool runner")
	}
	g := &Gate{contracts: map[string]*Contract{}, ledger: ledger, tools: tools, cfg: newConfig(opts)}
	for _, c := range contracts {
		if _, dup := g.contracts[c.Skill]; dup {
			return nil, fmt.Errorf("skill %q: %w", c.Skill, ErrDuplicateSkill)
		}
		g.contracts[c.Skill] = c
	}
	return g, nil
}

// verdict is one check's effect on the outcome.
type verdict int

const (
	pass verdict = iota
	missing
	contradicts
)

// report accumulates checks. The outcome is the worst verdict: a contradiction beats missing
// evidence, because waiting will not change a contradiction.
type report struct {
	checks []Check
	worst  verdict
}

func (r *report) add(name string, v verdict, format string, args ...any) {
	c := Check{Name: name, Passed: v == pass}
	if format != "" {
		c.Reason = fmt.Sprintf(format, args...)
	}
	r.checks = append(r.checks, c)
	r.worst = max(r.worst, v)
}

// Decide checks a completion of skill against its contract and, only if every check passes,
// commits it to the ledger. See the package documentation for the outcome of each check. An
// error means the gate could not decide (no contract, a non-terminal state, the ledger failed,
// ctx ended); the caller records Unknown.
func (g *Gate) Decide(ctx context.Context, skill string, c Completion) (d Decision, err error) {
	if g.cfg.tracer != nil {
		var span trace.Span
		ctx, span = g.cfg.tracer.Start(ctx, "handoff.gate.decide", trace.WithAttributes(attribute.String("handoff.skill", skill),
			attribute.String("handoff.peer", c.Peer), attribute.String("handoff.delegation_id", c.DelegationID), attribute.Int("handoff.gate.attempt", c.Attempt)))
		defer func() { endDecideSpan(span, d, err) }()
	}
	d, err = g.decide(ctx, skill, c)
	if err == nil && g.cfg.decided != nil {
		g.cfg.decided(ctx, skill, c, d)
	}
	return d, err
}

// endDecideSpan ends a decision's span with its outcome; anything but a
// commit is an error, with the failed checks (or the error) as its
// description.
func endDecideSpan(span trace.Span, d Decision, err error) {
	outcome := d.Outcome.String()
	if err != nil {
		outcome = Unknown.String()
	}
	span.SetAttributes(attribute.String("handoff.gate.outcome", outcome), attribute.Int("handoff.gate.checks", len(d.Reasons)))
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	case d.Outcome != Committed:
		var failed []string
		for _, c := range d.Reasons {
			if !c.Passed {
				failed = append(failed, c.Name+": "+c.Reason)
			}
		}
		span.SetStatus(codes.Error, outcome+": "+strings.Join(failed, "; "))
	}
	span.End()
}

// decide is Decide without its span.
func (g *Gate) decide(ctx context.Context, skill string, c Completion) (Decision, error) {
	contract, ok := g.contracts[skill]
	if !ok {
		return Decision{}, fmt.Errorf("skill %q: %w", skill, ErrNoContract)
	}
	switch c.RemoteState {
	case a2a.TaskStateCompleted:
	case a2a.TaskStateFailed, a2a.TaskStateRejected, a2a.TaskStateCanceled:
		reason := "the peer reported " + stateName(c.RemoteState)
		if c.RemoteMessage != "" {
			reason += ": " + quotePeer(c.RemoteMessage)
		}
		return Decision{
			Outcome: Failed,
			Reasons: []Check{{Name: "remote", Reason: reason}},
			Settle:  true,
		}, nil
	default:
		return Decision{}, fmt.Errorf("state %q: %w", c.RemoteState, ErrNotTerminal)
	}

	var r report
	evidence, broken := g.checkArtifacts(contract, c.Artifacts, &r)
	g.checkRequires(contract, evidence, broken, &r)
	g.checkFreshness(contract, evidence, broken, &r)
	firstVerifier := len(r.checks)
	if err := g.checkVerifiers(ctx, contract, evidence, &r); err != nil {
		return Decision{}, err
	}

	d := Decision{Reasons: r.checks, Settle: true}
	switch r.worst {
	case contradicts:
		d.Outcome = Rejected
	case missing:
		d.Outcome = Unknown
		d.Settle = c.Attempt >= g.cfg.maxReverify
	case pass:
		entry, err := g.commit(ctx, contract, c, evidence, r.checks[firstVerifier:])
		if err != nil {
			return Decision{}, err
		}
		d.Outcome, d.LedgerEntry = Committed, entry
	}
	return d, nil
}

// maxPeerText bounds, in runes, the peer's own words a reason quotes.
const maxPeerText = 200

// quotePeer quotes a peer's text for a reason: bounded, and with control
// characters escaped, since reasons reach terminals and logs.
func quotePeer(s string) string {
	if r := []rune(s); len(r) > maxPeerText {
		return strconv.QuoteToGraphic(string(r[:maxPeerText]) + "…")
	}
	return strconv.QuoteToGraphic(s)
}

// stateName drops the TASK_STATE_ prefix a peer would not recognise in a sentence.
func stateName(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

// checkArtifacts validates every expected artifact and returns the data of those present and
// valid, and the names of those present but not JSON or breaking their schema. Data goes
// through JSON first so that schemas, pointers, CEL and digests all see the same JSON values,
// whatever Go types the transport produced.
func (g *Gate) checkArtifacts(contract *Contract, arts []*a2a.Artifact, r *report) (evidence map[string]any, broken map[string]bool) {
	evidence, broken = map[string]any{}, map[string]bool{}
	for _, spec := range contract.artifacts {
		name := "artifact " + spec.name
		raw, found := artifactData(arts, spec.name)
		if !found {
			r.add(name, missing, "no artifact %q with a data part", spec.name)
			continue
		}
		data, err := normalize(raw)
		if err != nil {
			broken[spec.name] = true
			r.add(name, contradicts, "artifact %q is not JSON", spec.name)
			continue
		}
		if err := spec.schema.Validate(data); err != nil {
			broken[spec.name] = true
			r.add(name, contradicts, "artifact %q breaks its schema: %v", spec.name, err)
			continue
		}
		evidence[spec.name] = data
		r.add(name, pass, "")
	}
	return evidence, broken
}

func artifactData(arts []*a2a.Artifact, name string) (any, bool) {
	for _, a := range arts {
		if a == nil || a.Name != name {
			continue
		}
		for _, p := range a.Parts {
			if p == nil {
				continue
			}
			if _, ok := p.Content.(a2a.Data); ok {
				return p.Data(), true
			}
		}
	}
	return nil, false
}

// normalize turns v into plain JSON values (map[string]any, []any, float64, string, bool, nil)
// by a round trip through encoding/json: the only types schemas, pointers and CEL all accept.
func normalize(v any) (any, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(js, &out)
}

// lookup resolves a reference in the evidence. An artifact that failed its own check is
// absent; its check already carries the reason, so the caller only marks what depends on it.
func lookup(evidence map[string]any, ref reference) (any, bool) {
	data, ok := evidence[ref.artifact]
	if !ok {
		return nil, false
	}
	return ref.pointer.get(data)
}

// checkRequires checks the commit_requires members. Those of a broken artifact are not
// checked: its own check says what is wrong, and its members are not missing.
func (g *Gate) checkRequires(contract *Contract, evidence map[string]any, broken map[string]bool, r *report) {
	for _, ref := range contract.requires {
		if broken[ref.artifact] {
			continue
		}
		name := "requires " + ref.String()
		v, ok := lookup(evidence, ref)
		switch {
		case !ok:
			r.add(name, missing, "%s is missing", ref)
		case isEmpty(v):
			r.add(name, missing, "%s is empty", ref)
		default:
			r.add(name, pass, "")
		}
	}
}

// isEmpty reports the values commit_requires refuses: null, "", [] and {}. false and 0 are
// values a peer stated, so they count as present.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// checkFreshness checks the contract's freshness, unless its artifact is broken.
func (g *Gate) checkFreshness(contract *Contract, evidence map[string]any, broken map[string]bool, r *report) {
	f := contract.freshness
	if f == nil || broken[f.at.artifact] {
		return
	}
	name := "freshness " + f.at.String()
	v, ok := lookup(evidence, f.at)
	if !ok {
		r.add(name, missing, "%s is missing", f.at)
		return
	}
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		r.add(name, contradicts, "%s is not an RFC 3339 time", f.at)
		return
	}
	now := g.cfg.now()
	switch age := now.Sub(at); {
	case age > f.maxAge:
		r.add(name, contradicts, "%s is %s old, more than %s", f.at, age.Round(time.Second), f.maxAge)
	case age < -clockSkew:
		r.add(name, contradicts, "%s is in the future", f.at)
	default:
		r.add(name, pass, "")
	}
}

// checkVerifiers runs each verifier whose arguments the evidence supplies. Once a check has
// contradicted the contract the outcome is Rejected whatever the verifiers say, so they are
// not run: a verifier is a governed tool call, with a cost.
func (g *Gate) checkVerifiers(ctx context.Context, contract *Contract, evidence map[string]any, r *report) error {
	for _, v := range contract.verifiers {
		name := "verifier " + v.name
		if r.worst == contradicts {
			r.add(name, missing, "not run: the evidence already contradicts the contract")
			continue
		}
		args, absent := v.arguments(evidence)
		if absent != "" {
			r.add(name, missing, "not run: %s is missing", absent)
			continue
		}
		result, err := g.tools.RunTool(ctx, v.tool, args)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			r.add(name, missing, "the verifier could not answer")
			continue
		}
		if result, err = normalize(result); err != nil {
			r.add(name, missing, "the verifier could not answer")
			continue
		}
		ok, err := v.condition.eval(ctx, result, evidence)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			r.add(name, missing, "the verifier's result could not be judged")
		case !ok:
			r.add(name, contradicts, "the verifier disagrees: %s", v.condition.explain(ctx, result, evidence))
		default:
			r.add(name, pass, "")
		}
	}
	return nil
}

// arguments builds a verifier's tool arguments, or names the first reference the evidence
// lacks.
func (v verifier) arguments(evidence map[string]any) (map[string]any, string) {
	args := make(map[string]any, len(v.args))
	for name, a := range v.args {
		if a.ref == nil {
			args[name] = a.literal
			continue
		}
		val, ok := lookup(evidence, *a.ref)
		if !ok {
			return nil, a.ref.String()
		}
		args[name] = val
	}
	return args, ""
}

func (g *Gate) commit(ctx context.Context, contract *Contract, c Completion, evidence map[string]any, verifiers []Check) (*Entry, error) {
	digests := make(map[string]string, len(evidence))
	for name, data := range evidence {
		if d, ok := c.Digests[name]; ok {
			digests[name] = d
			continue
		}
		d, err := digest(data)
		if err != nil {
			return nil, fmt.Errorf("digest of artifact %q: %w", name, err)
		}
		digests[name] = d
	}
	entry := &Entry{
		DelegationID:    c.DelegationID,
		Skill:           contract.Skill,
		ContractVersion: contract.Version,
		EvidenceDigests: digests,
		Verifiers:       slices.Clone(verifiers),
		CommittedAt:     g.cfg.now().UTC(),
	}
	stored, err := g.ledger.Commit(ctx, entry)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return stored, nil
}

// digest is the SHA-256 of the RFC 8785 canonical JSON of data, so that equal evidence has one
// digest however a peer ordered or spaced it.
func digest(data any) (string, error) {
	canon, err := jcs.Append(nil, data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
