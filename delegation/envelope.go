package delegation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// EnvelopeExtension is the URI of Handoff's delegation extension. An agent
// that enforces envelopes declares it in its card's capabilities.extensions
// (see [ExtensionDeclaration]); a caller activates it with the
// A2A-Extensions header and carries the envelope in the message metadata
// under this key.
const EnvelopeExtension = "https://github.com/handoff-a2a/handoff/ext/delegation/v1"

// DefaultMaxHops is the hop limit a [ReceiverPolicy] with no MaxHops enforces.
const DefaultMaxHops = 4

// A Hop names one agent a delegated task passed through.
type Hop struct {
	// Agent is the agent's name, as its card gives it: shown in refusals,
	// never compared, since two agents may share a name.
	Agent string
	// CardDigest is the agent's [CardDigest], or empty when unknown. It is
	// the agent's identity in cycle detection: a hop without one matches
	// no agent, and the hop limit alone bounds its chain.
	CardDigest string
}

// An Envelope travels with a delegated task and bounds what the receiver may
// do with it. Each sender forwards it with [Envelope.Next], so Hops counts
// the agents it has passed through and Provenance names them in order.
type Envelope struct {
	// Actor is who the work is ultimately done for (a user or principal); required.
	Actor string
	// Tenant is the actor's tenant, empty in a single-tenant deployment.
	Tenant string
	// Scopes are what the actor authorised; the receiver must grant each one.
	Scopes []string
	// Provenance lists the agents the task passed through, oldest first.
	Provenance []Hop
	// Deadline is when the work stops being useful; required, since work
	// without one could run forever on the receiver's account.
	Deadline time.Time
	// IdempotencyKey makes a retried delegation find the task it already
	// started instead of starting another.
	IdempotencyKey string
	// Hops is how many times the task has been forwarded. It is never less
	// than len(Provenance): a chain longer than its count was tampered with.
	Hops int
}

// wireEnvelope is the envelope's JSON form in message metadata. The deadline
// is a string so that encoding cannot fail whatever the Deadline holds.
type wireEnvelope struct {
	Actor          string    `json:"actor"`
	Tenant         string    `json:"tenant,omitempty"`
	Scopes         []string  `json:"scopes,omitempty"`
	Provenance     []wireHop `json:"provenance,omitempty"`
	Deadline       string    `json:"deadline,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	Hops           int       `json:"hops"`
}

type wireHop struct {
	Agent      string `json:"agent"`
	CardDigest string `json:"cardDigest,omitempty"`
}

// digestPattern is the form [CardDigest] writes.
var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ExtensionDeclaration returns the entry an enforcing agent lists in its
// card's capabilities.extensions. It is not required: callers without the
// extension are served as direct callers, with no envelope to enforce.
func ExtensionDeclaration() a2a.AgentExtension {
	return a2a.AgentExtension{
		URI:         EnvelopeExtension,
		Description: "Delegation envelope: actor, tenant, scopes, provenance, deadline, idempotency key and hop count, enforced by the receiver.",
	}
}

// Attach writes e into m's metadata under [EnvelopeExtension], replacing any
// envelope there, and lists the extension in m.Extensions. The metadata holds
// plain JSON values (maps, slices, strings, numbers), as it would after a
// trip over the wire, so every transport, gRPC's Struct included, carries it.
func (e *Envelope) Attach(m *a2a.Message) {
	w := wireEnvelope{
		Actor:          e.Actor,
		Tenant:         e.Tenant,
		Scopes:         e.Scopes,
		IdempotencyKey: e.IdempotencyKey,
		Hops:           e.Hops,
	}
	for _, h := range e.Provenance {
		w.Provenance = append(w.Provenance, wireHop(h))
	}
	if !e.Deadline.IsZero() {
		w.Deadline = e.Deadline.UTC().Format(time.RFC3339Nano)
	}
	// Neither call can fail: w holds only strings, ints and slices of them,
	// and the bytes are the JSON encoding/json just wrote.
	b, _ := json.Marshal(w)
	var plain map[string]any
	_ = json.Unmarshal(b, &plain)
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	m.Metadata[EnvelopeExtension] = plain
	if !slices.Contains(m.Extensions, EnvelopeExtension) {
		m.Extensions = append(m.Extensions, EnvelopeExtension)
	}
}

// EnvelopeFrom reads the envelope in m's metadata. It reports whether one is
// present (the [EnvelopeExtension] key is set) and, when present, whether it
// is well formed: an error wraps [ErrMalformedEnvelope]. Unknown members are
// refused rather than ignored, since one could be a limit this receiver
// would fail to enforce. The Deadline comes back in UTC.
func EnvelopeFrom(m *a2a.Message) (*Envelope, bool, error) {
	if m == nil {
		return nil, false, nil
	}
	v, ok := m.Metadata[EnvelopeExtension]
	if !ok {
		return nil, false, nil
	}
	// The value is whatever the transport decoded (usually map[string]any);
	// encoding it again lets one strict decoder read every form.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	if !bytes.HasPrefix(b, []byte("{")) {
		return nil, true, fmt.Errorf("%w: not a JSON object", ErrMalformedEnvelope)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w wireEnvelope
	if err := dec.Decode(&w); err != nil {
		return nil, true, fmt.Errorf("%w: %w", ErrMalformedEnvelope, err)
	}
	e := &Envelope{
		Actor:          w.Actor,
		Tenant:         w.Tenant,
		Scopes:         w.Scopes,
		IdempotencyKey: w.IdempotencyKey,
		Hops:           w.Hops,
	}
	for _, h := range w.Provenance {
		e.Provenance = append(e.Provenance, Hop(h))
	}
	if w.Deadline != "" {
		t, err := time.Parse(time.RFC3339Nano, w.Deadline)
		if err != nil {
			return nil, true, fmt.Errorf("%w: deadline %q is not RFC 3339", ErrMalformedEnvelope, w.Deadline)
		}
		e.Deadline = t.UTC()
	}
	if err := validate(e); err != nil {
		return nil, true, err
	}
	return e, true, nil
}

// validate checks what every envelope must satisfy, whoever receives it.
func validate(e *Envelope) error {
	switch {
	case e == nil:
		return fmt.Errorf("%w: no envelope", ErrMalformedEnvelope)
	case e.Actor == "":
		return fmt.Errorf("%w: no actor", ErrMalformedEnvelope)
	case e.Hops < len(e.Provenance):
		return fmt.Errorf("%w: hops %d with %d agents in the provenance", ErrMalformedEnvelope, e.Hops, len(e.Provenance))
	case e.Deadline.IsZero():
		return fmt.Errorf("%w: no deadline (an RFC 3339 time after which the work stops being useful is required)", ErrMalformedEnvelope)
	}
	// Attach writes the deadline as RFC 3339, which has four-digit years only.
	if y := e.Deadline.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("%w: deadline year %d out of range", ErrMalformedEnvelope, y)
	}
	for i, s := range e.Scopes {
		if s == "" {
			return fmt.Errorf("%w: scope %d is empty", ErrMalformedEnvelope, i)
		}
	}
	for i, h := range e.Provenance {
		if h.Agent == "" {
			return fmt.Errorf("%w: provenance hop %d has no agent", ErrMalformedEnvelope, i)
		}
		if h.CardDigest != "" && !digestPattern.MatchString(h.CardDigest) {
			return fmt.Errorf("%w: provenance hop %d: card digest %q is not sha256:<64 hex>", ErrMalformedEnvelope, i, h.CardDigest)
		}
	}
	return nil
}

// Next returns the envelope self forwards to its next peer: one more hop,
// with self appended to the provenance. e is not changed.
func (e *Envelope) Next(self Hop) *Envelope {
	next := *e
	next.Scopes = slices.Clone(e.Scopes)
	next.Provenance = append(slices.Clone(e.Provenance), self)
	next.Hops = e.Hops + 1
	return &next
}

// A ReceiverPolicy is what an agent allows delegated callers.
type ReceiverPolicy struct {
	// MaxHops is the most forwards a task may have taken to reach this
	// agent. Zero or less means [DefaultMaxHops].
	MaxHops int
	// Granted are the scopes this agent grants. None is the default: an
	// envelope asking for any scope is refused.
	Granted []string
}

// Check decides whether self may act on e, at now. It returns nil or an
// error wrapping one of [ErrMalformedEnvelope], [ErrHopLimit], [ErrCycle],
// [ErrDeadlinePassed] or [ErrScopeNotGranted], checked in that order. A
// refused envelope means nothing may be executed for it. A cycle is self's
// card digest in the provenance, whatever name the hop gives; a self
// without a digest detects none.
func Check(e *Envelope, self Hop, policy ReceiverPolicy, now time.Time) error {
	if err := validate(e); err != nil {
		return err
	}
	limit := policy.MaxHops
	if limit <= 0 {
		limit = DefaultMaxHops
	}
	if e.Hops > limit {
		return fmt.Errorf("%w: %d hops, at most %d", ErrHopLimit, e.Hops, limit)
	}
	for i, h := range e.Provenance {
		if self.CardDigest != "" && h.CardDigest == self.CardDigest {
			return fmt.Errorf("%w: agent %q (card %s) already at hop %d", ErrCycle, h.Agent, h.CardDigest, i)
		}
	}
	if !now.Before(e.Deadline) {
		return fmt.Errorf("%w: deadline %s, now %s", ErrDeadlinePassed, e.Deadline.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	var missing []string
	for _, s := range e.Scopes {
		if !slices.Contains(policy.Granted, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %q", ErrScopeNotGranted, missing)
	}
	return nil
}
