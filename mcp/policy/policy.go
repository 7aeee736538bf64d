package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Layer is where a rule sits. Layers are tried highest first, and the first layer with a
// matching rule decides, so a deny is never overridden by anything below it.
type Layer uint8

const (
	// LayerImmutable holds the binary's own denies: the agent's config, never a lower
	// authority.
	LayerImmutable Layer = iota + 1
	// LayerTenant holds a tenant's denies.
	LayerTenant
	// LayerResource holds denies on resources (paths, URLs, ids); a call whose resources
	// cannot be made canonical is denied here too.
	LayerResource
	// LayerAsk holds mandatory asks: every call waits for an approval of its own, whatever
	// grant or allow exists. A contract's approval: mandatory sits here.
	LayerAsk
	// LayerGrant holds the approvals an approver gave for a task or a scope ([Grant]).
	LayerGrant
	// LayerAllow holds allows (and asks a grant may answer) for agents, skills, principals
	// and tenants. A contract's approval: none is an allow here, unless the tool is a
	// high-risk destructive or external_send one.
	LayerAllow
	// LayerDefault decides when nothing above matched: deny for a tool without a contract,
	// ask for write, destructive and external_send, allow for reads.
	LayerDefault
)

var layerNames = [...]string{"", "immutable", "tenant", "resource", "ask", "grant", "allow", "default"}

// String returns the layer's name as configured.
func (l Layer) String() string {
	if int(l) < len(layerNames) {
		return layerNames[l]
	}
	return fmt.Sprintf("layer(%d)", l)
}

// MarshalText writes the layer's name.
func (l Layer) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads a layer's name.
func (l *Layer) UnmarshalText(b []byte) error {
	for i, n := range layerNames {
		if i > 0 && n == string(b) {
			*l = Layer(i)
			return nil
		}
	}
	return fmt.Errorf("unknown policy layer %q", b)
}

// Verdict is what a rule, and so a decision, says of a call.
type Verdict string

const (
	// Allow: the call runs.
	Allow Verdict = "allow"
	// Deny: the call never runs.
	Deny Verdict = "deny"
	// Ask: the call runs only with an approval.
	Ask Verdict = "ask"
)

// builtinPrefix starts the ids of the rules the policy makes itself (contract, default,
// grant, resource errors), so that they never clash with a configured one.
const builtinPrefix = "builtin:"

// Ids of the built-in rules.
const (
	// RuleContractAsk is the ask of a contract with approval: mandatory.
	RuleContractAsk = builtinPrefix + "contract-approval-mandatory"
	// RuleContractAllow is the allow of a contract with approval: none.
	RuleContractAllow = builtinPrefix + "contract-approval-none"
	// RuleNoContract is the default deny of a tool no contract covers.
	RuleNoContract = builtinPrefix + "default-no-contract"
	// RuleDefaultAsk is the default ask of a write, destructive or external_send tool.
	RuleDefaultAsk = builtinPrefix + "default-ask"
	// RuleDefaultAllow is the default allow of a read.
	RuleDefaultAllow = builtinPrefix + "default-allow-read"
	// RuleBadResource is the deny of a call whose resources cannot be made canonical.
	RuleBadResource = builtinPrefix + "resource-not-canonical"
)

// Call is what the policy knows of one proposed tool call, after canonicalisation.
type Call struct {
	// Principal, Tenant and Skill say who asked and for what; empty when unknown (a rule
	// that names them then does not match).
	Principal, Tenant, Skill string
	// TaskID is the task the call belongs to; task grants are bound to it.
	TaskID string
	// Tool is the catalog name, server__tool.
	Tool string
	// Contracted says a configured contract covers the tool; Effect, Risk and Mandatory
	// are its classification (for an uncovered tool, the fail-closed defaults).
	Contracted bool
	// Effect is the contract's effect: read, write, destructive or external_send.
	Effect string
	// Risk is the contract's risk: low or high.
	Risk string
	// Mandatory says the contract's approval is mandatory.
	Mandatory bool
	// Args are the canonical arguments, numbers as float64; only When conditions read them.
	Args map[string]any
	// Resources are the canonical resources [Extract] took from the arguments.
	Resources []Resource
	// ResourceErr, when set, is why the resources could not be taken: the call is denied
	// at [LayerResource].
	ResourceErr error
	// Grants are the grants that may cover the call (the store's for this principal and
	// task); the policy checks each.
	Grants []Grant
	// Now is the time grants' expiries are checked against; zero means time.Now().
	Now time.Time
}

// Match is one rule that matched a call.
type Match struct {
	// Rule is the rule's id.
	Rule string `json:"rule"`
	// Layer is the rule's layer.
	Layer Layer `json:"layer"`
	// Verdict is what the rule says.
	Verdict Verdict `json:"verdict"`
}

// Decision is the policy's answer to a [Call], with what it rests on.
type Decision struct {
	// Verdict is allow, deny or ask.
	Verdict Verdict `json:"verdict"`
	// Rule and Layer name the deciding rule.
	Rule string `json:"rule"`
	// Layer is the deciding rule's layer.
	Layer Layer `json:"layer"`
	// Version is the [Policy.Version] that decided.
	Version string `json:"version"`
	// Reason says why, for the caller and the audit; it names no argument values.
	Reason string `json:"reason"`
	// Matched is every rule that matched, highest layer first, the deciding one included.
	Matched []Match `json:"matched"`
}

// Policy is a compiled, immutable set of rules. Its methods are safe for concurrent use.
type Policy struct {
	byLayer [LayerDefault + 1][]*compiled
	rules   []*compiled
	version string
}

// New compiles rules. Every problem is reported at once, each a *[FieldError] in the
// joined error. extra is hashed into the version with the rules: what else decides (the
// contracts), so that a change to it is a new version.
func New(rules []Rule, extra []byte) (*Policy, error) {
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	p := &Policy{}
	var errs []error
	seen := map[string]int{}
	for i, r := range rules {
		c, problems := compileRule(env, r)
		if j, dup := seen[r.ID]; dup && r.ID != "" {
			problems = append(problems, FieldError{Field: "id", Msg: fmt.Sprintf("%q is also rules[%d]'s", r.ID, j)})
		}
		seen[r.ID] = i
		for _, fe := range problems {
			fe.Index = i
			errs = append(errs, &fe)
		}
		if len(problems) == 0 {
			p.rules = append(p.rules, c)
			p.byLayer[c.layer] = append(p.byLayer[c.layer], c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h := sha256.New()
	enc, _ := json.Marshal(rules) // strings and lists only: cannot fail
	h.Write(enc)
	h.Write([]byte{0})
	h.Write(extra)
	p.version = hex.EncodeToString(h.Sum(nil))[:16]
	return p, nil
}

// Version is a hash of the rules (and New's extra): two policies with one version decide
// alike.
func (p *Policy) Version() string { return p.version }

// Rules returns the rules as configured.
func (p *Policy) Rules() []Rule {
	out := make([]Rule, len(p.rules))
	for i, c := range p.rules {
		out[i] = c.Rule
	}
	return out
}

// Forbids reports the rule that denies c whatever its arguments, if one does: a rule of a
// deny layer (immutable, tenant, resource) that names no resources and no condition and
// matches c's caller, skill and tool. c's arguments, resources and grants are not read (a
// grant never beats a deny). It is what a caller is not entitled to: a model is never shown
// such a tool.
func (p *Policy) Forbids(c *Call) (Rule, bool) {
	for l := LayerImmutable; l <= LayerResource; l++ {
		for _, r := range p.byLayer[l] {
			if r.verdict != Deny || len(r.paths)+len(r.urls)+len(r.IDs) > 0 || r.when != nil {
				continue
			}
			if r.matches(&Call{Principal: c.Principal, Tenant: c.Tenant, Skill: c.Skill, Tool: c.Tool, Effect: c.Effect, Risk: c.Risk}, nil) {
				return r.Rule, true
			}
		}
	}
	return Rule{}, false
}

// Decide answers one call. It never fails: a problem in the call (resources that are not
// canonical, a condition that cannot be evaluated) decides toward deny, as documented on
// [Rule.When] and [LayerResource].
func (p *Policy) Decide(c *Call) Decision {
	dc := decider{d: Decision{Version: p.version, Matched: make([]Match, 0, 4)}, best: -1}
	var act *activation // built once, only if a condition needs it
	for l := LayerImmutable; l <= LayerDefault; l++ {
		dc.layerStart = len(dc.d.Matched)
		for _, r := range p.byLayer[l] {
			if r.matches(c, &act) {
				dc.add(Match{Rule: r.ID, Layer: l, Verdict: r.verdict}, r)
			}
		}
		switch l {
		case LayerResource:
			if c.ResourceErr != nil {
				dc.addBuiltin(Match{Rule: RuleBadResource, Layer: l, Verdict: Deny}, "resources not canonical: "+c.ResourceErr.Error())
			}
		case LayerAsk:
			if c.Contracted && c.Mandatory {
				dc.addBuiltin(Match{Rule: RuleContractAsk, Layer: l, Verdict: Ask}, "tool "+c.Tool+" needs an approval")
			}
		case LayerGrant:
			for i := range c.Grants {
				if g := &c.Grants[i]; g.covers(c) {
					dc.addBuiltin(Match{Rule: "grant:" + g.ID, Layer: l, Verdict: Allow}, "")
				}
			}
		case LayerAllow:
			if c.Contracted && !c.Mandatory && !(c.Risk == "high" && (c.Effect == "destructive" || c.Effect == "external_send")) {
				dc.addBuiltin(Match{Rule: RuleContractAllow, Layer: l, Verdict: Allow}, "")
			}
		case LayerDefault:
			switch {
			case !c.Contracted:
				dc.addBuiltin(Match{Rule: RuleNoContract, Layer: l, Verdict: Deny}, "tool "+c.Tool+" has no contract")
			case c.Effect == "read":
				dc.addBuiltin(Match{Rule: RuleDefaultAllow, Layer: l, Verdict: Allow}, "")
			default:
				dc.addBuiltin(Match{Rule: RuleDefaultAsk, Layer: l, Verdict: Ask},
					fmt.Sprintf("tool %s is a %s-risk %s tool and needs an approval", c.Tool, c.Risk, c.Effect))
			}
		}
		dc.endLayer()
	}
	// The deciding match goes first; the others keep their order.
	if dc.best > 0 {
		m := dc.d.Matched[dc.best]
		copy(dc.d.Matched[1:dc.best+1], dc.d.Matched[:dc.best])
		dc.d.Matched[0] = m
	}
	return dc.d
}

// decider gathers one decision's matches, layer by layer.
type decider struct {
	d          Decision
	decided    bool
	layerStart int
	best       int // index in d.Matched of the deciding match, or of the best so far in this layer
	bestRule   *compiled
	bestReason string
}

// add records a configured rule's match: the first of a layer leads it, unless a stricter
// one follows (ask beats allow in the allow layer).
func (dc *decider) add(m Match, r *compiled) {
	dc.d.Matched = append(dc.d.Matched, m)
	if dc.decided {
		return
	}
	if dc.best < dc.layerStart || (dc.d.Matched[dc.best].Verdict == Allow && m.Verdict != Allow) {
		dc.best, dc.bestRule, dc.bestReason = len(dc.d.Matched)-1, r, ""
	}
}

func (dc *decider) addBuiltin(m Match, reason string) {
	dc.add(m, nil)
	if !dc.decided && dc.best == len(dc.d.Matched)-1 {
		dc.bestReason = reason
	}
}

// endLayer decides if the layer just tried had a match.
func (dc *decider) endLayer() {
	if dc.decided || dc.best < dc.layerStart {
		return
	}
	dc.decided = true
	m := dc.d.Matched[dc.best]
	dc.d.Verdict, dc.d.Rule, dc.d.Layer, dc.d.Reason = m.Verdict, m.Rule, m.Layer, dc.bestReason
	if dc.bestRule != nil {
		dc.d.Reason = dc.bestRule.reason()
	}
}

func (r *compiled) reason() string {
	if r.Reason != "" {
		return r.Reason
	}
	if r.verdict == Allow {
		return ""
	}
	return fmt.Sprintf("policy rule %s (%s)", r.ID, r.layer)
}

// matches reports whether r matches c. act is the condition's activation, built on first
// use and shared by the rules of one decision.
func (r *compiled) matches(c *Call, act **activation) bool {
	if !anyTool(r.tools, c.Tool) || !anyGlob(r.Principals, c.Principal) || !anyGlob(r.Tenants, c.Tenant) ||
		!anyGlob(r.Skills, c.Skill) || !anyExact(r.Effects, c.Effect) || !anyExact(r.Risks, c.Risk) {
		return false
	}
	if len(r.Principals) > 0 && c.Principal == "" || len(r.Tenants) > 0 && c.Tenant == "" || len(r.Skills) > 0 && c.Skill == "" {
		return false // a glob "*" does not make an unknown caller known
	}
	every := r.verdict == Allow
	if !resourcesMatch(c.Resources, KindPath, r.paths, every, pathUnder) ||
		!resourcesMatch(c.Resources, KindURL, r.urls, every, urlUnder) ||
		!resourcesMatch(c.Resources, KindID, r.IDs, every, func(a, b string) bool { return a == b }) {
		return false
	}
	if r.when == nil {
		return true
	}
	if *act == nil {
		*act = newActivation(c)
	}
	out, _, err := r.when.Eval(*act)
	if err != nil {
		return !every // failure never widens
	}
	b, ok := out.Value().(bool)
	return ok && b
}

func anyExact(vals []string, s string) bool {
	if len(vals) == 0 {
		return true
	}
	for _, v := range vals {
		if v == s {
			return true
		}
	}
	return false
}

// resourcesMatch applies one resource field of a rule: no prefixes match everything; else
// any resource of kind under a prefix (every: all of them, and at least one).
func resourcesMatch(rs []Resource, kind Kind, prefixes []string, every bool, under func(prefix, v string) bool) bool {
	if len(prefixes) == 0 {
		return true
	}
	seen := false
	for _, res := range rs {
		if res.Kind != kind {
			continue
		}
		seen = true
		hit := false
		for _, p := range prefixes {
			if under(p, res.Value) {
				hit = true
				break
			}
		}
		if hit && !every {
			return true
		}
		if !hit && every {
			return false
		}
	}
	return every && seen
}

// activation is the variables of a When condition for one call. Each is made a CEL value at
// its first use in a decision, args deeply (so that reading a field allocates nothing), and
// then shared by every condition that reads it.
type activation struct {
	c    *Call
	vals [len(celVars)]ref.Val
}

// celVars are the variables a When sees, in activation order.
var celVars = [...]string{"principal", "tenant", "skill", "tool", "effect", "risk", "args", "paths", "urls", "ids"}

func newActivation(c *Call) *activation { return &activation{c: c} }

// ResolveName implements cel-go's interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	for i, n := range celVars {
		if n != name {
			continue
		}
		if a.vals[i] == nil {
			a.vals[i] = a.value(i)
		}
		return a.vals[i], true
	}
	return nil, false
}

func (a *activation) value(i int) ref.Val {
	c := a.c
	switch celVars[i] {
	case "principal":
		return types.String(c.Principal)
	case "tenant":
		return types.String(c.Tenant)
	case "skill":
		return types.String(c.Skill)
	case "tool":
		return types.String(c.Tool)
	case "effect":
		return types.String(c.Effect)
	case "risk":
		return types.String(c.Risk)
	case "args":
		if c.Args == nil {
			return celValue(map[string]any{})
		}
		return celValue(c.Args)
	}
	kind := KindID
	switch celVars[i] {
	case "paths":
		kind = KindPath
	case "urls":
		kind = KindURL
	}
	var vals []ref.Val
	for _, r := range c.Resources {
		if r.Kind == kind {
			vals = append(vals, types.String(r.Value))
		}
	}
	return types.NewRefValList(types.DefaultTypeAdapter, vals)
}

// celValue converts decoded JSON to CEL values all the way down.
func celValue(v any) ref.Val {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(v))
		for k, e := range v {
			m[types.String(k)] = celValue(e)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case []any:
		l := make([]ref.Val, len(v))
		for i, e := range v {
			l[i] = celValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, l)
	default:
		return types.DefaultTypeAdapter.NativeToValue(v)
	}
}

// Parent implements cel-go's interpreter.Activation: there is none.
func (a *activation) Parent() interpreter.Activation { return nil }
