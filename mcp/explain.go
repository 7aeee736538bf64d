package mcp

import (
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
}

// Explain says what a pipeline with these contracts and options would decide of prop,
// without running anything and without a Manager: the same contract lookup, canonical
// arguments, resources and rules as [Pipeline.Run]. It skips what needs the tool's server
// (the snapshot check and the inputSchema), so a call whose arguments the schema refuses is
// explained all the same. Grants are not consulted: it explains the configured policy.
func Explain(contracts []Contract, prop Proposal, opts ...PipelineOption) (Explanation, error) {
	gov, err := newPolicy(contracts, make([]byte, minKeyLen), opts)
	if err != nil {
		return Explanation{}, err
	}
	return gov.explain(prop)
}

// Explain is [Explain] under the pipeline's current contracts and rules.
func (p *Pipeline) Explain(prop Proposal) (Explanation, error) { return p.gov.Load().explain(prop) }

func (gov *governance) explain(prop Proposal) (Explanation, error) {
	c := gov.contracts.lookup(prop.Tool)
	_, plain, _, err := canonicalise(prop.Tool, prop.Arguments)
	if err != nil {
		return Explanation{}, fmt.Errorf("explain %s: %w", prop.Tool, err)
	}
	pd := gov.decide(prop, c, plain, nil)
	return Explanation{Decision: pd.Decision, Contract: c.Contract, Resources: pd.resources}, nil
}
