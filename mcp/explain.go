package mcp

import (
	"context"
	"fmt"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// Explanation is what the policy would decide of a proposal, and on what.
type Explanation struct {
	// Decision is the engine's: verdict, deciding rule and layer, version, every match.
	policy.Decision
	// Contract is the contract that governs the tool (its Tool is the glob that matched, or
	// the tool itself under [DefaultContract]).
	Contract Contract `json:"-"`
	// Resources are the canonical resources the decision was made on.
	Resources []policy.Resource `json:"resources"`
	// Hooks are the hooks the call would run, in their order: the pre_tool_call guards
	// unless the policy denies, then the post_tool_call observers. None is run.
	Hooks []ExplainedHook `json:"hooks"`
}

// ExplainedHook names a hook an [Explanation] says the call would run.
type ExplainedHook struct {
	// Name is the hook's name.
	Name string `json:"name"`
	// Point is pre_tool_call or post_tool_call.
	Point HookPoint `json:"point"`
}

// Explain says what a pipeline with these contracts and options would decide of prop,
// without running anything and without a Manager: the same contract lookup, canonical
// arguments, resources and rules as [Pipeline.Run]. It skips what needs the tool's server
// (the snapshot check and the inputSchema), so a call whose arguments the schema refuses is
// explained all the same. Grants are not consulted: it explains the configured policy
// ([ExplainContext] consults them).
func Explain(contracts []Contract, prop Proposal, opts ...PipelineOption) (Explanation, error) {
	gov, err := newPolicy(contracts, make([]byte, minKeyLen), opts)
	if err != nil {
		return Explanation{}, err
	}
	return gov.explain(prop, nil)
}

// ExplainContext is [Explain] that also consults the grants of the store given with
// [WithGrants], as [Pipeline.Run] does: those of prop.Principal (none for an empty one),
// task grants only of prop.TaskID. It only reads them; a store that cannot be read is an
// error, not an explanation without grants.
func ExplainContext(ctx context.Context, contracts []Contract, prop Proposal, opts ...PipelineOption) (Explanation, error) {
	gov, err := newPolicy(contracts, make([]byte, minKeyLen), opts)
	if err != nil {
		return Explanation{}, err
	}
	var grants []policy.Grant
	if gov.cfg.grants != nil && prop.Principal != "" {
		if grants, err = gov.cfg.grants.Grants(ctx, GrantFilter{Principal: prop.Principal, TaskID: prop.TaskID}); err != nil {
			return Explanation{}, fmt.Errorf("explain %s: read grants: %w", prop.Tool, err)
		}
	}
	return gov.explain(prop, grants)
}

// Explain is [Explain] under the pipeline's current contracts and rules.
func (p *Pipeline) Explain(prop Proposal) (Explanation, error) {
	return p.gov.Load().explain(prop, nil)
}

func (gov *governance) explain(prop Proposal, grants []policy.Grant) (Explanation, error) {
	c := gov.contracts.lookup(prop.Tool)
	_, plain, _, err := canonicalise(prop.Tool, prop.Arguments)
	if err != nil {
		return Explanation{}, fmt.Errorf("explain %s: %w", prop.Tool, err)
	}
	pd := gov.decide(prop, c, plain, grants)
	x := Explanation{Decision: pd.Decision, Contract: c.Contract, Resources: pd.resources, Hooks: []ExplainedHook{}}
	if pd.Verdict != policy.Deny { // a denied call meets no guard
		for _, h := range gov.hooks.pre {
			x.Hooks = append(x.Hooks, ExplainedHook{Name: h.Name, Point: h.Point})
		}
	}
	for _, h := range gov.hooks.post {
		x.Hooks = append(x.Hooks, ExplainedHook{Name: h.Name, Point: h.Point})
	}
	return x, nil
}
