package handoff

import (
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// PolicyConfig is the policy section: rules in fixed layers that decide
// every tool call, whoever proposes it (package mcp/policy documents the
// layers and each field of a rule).
type PolicyConfig struct {
	// Rules are tried by layer, highest first; see [policy.Rule].
	Rules []policy.Rule `yaml:"rules"`
}

// validatePolicy reports each problem of the policy section and of the
// contracts' resources under the key it belongs to.
func (c *Config) validatePolicy(bad func(key, format string, args ...any)) {
	if _, err := policy.New(c.Policy.Rules, nil); err != nil {
		for _, e := range unjoin(err) {
			var fe *policy.FieldError
			if errors.As(e, &fe) {
				bad(fmt.Sprintf("policy.rules[%d].%s", fe.Index, fe.Field), "%s", fe.Msg)
			} else {
				bad("policy", "%v", e)
			}
		}
	}
	for i, tc := range c.ToolContracts {
		if err := policy.CheckSpecs(tc.Resources); err != nil {
			bad(fmt.Sprintf("tool_contracts[%d].resources", i), "%v", err)
		}
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// pipelineOptions are the tool pipeline's options from c: who may approve,
// the policy rules, and where grants are kept.
func pipelineOptions(c *Config, grants mcp.GrantStore) []mcp.PipelineOption {
	return []mcp.PipelineOption{
		mcp.WithApprovers(func(p string) bool { return slices.Contains(c.Approvers, p) }),
		mcp.WithPolicy(c.Policy.Rules...),
		mcp.WithGrants(grants),
	}
}

// openGrants returns the grant store beside audit: in the bbolt audit
// file, or in the task store's Redis under the agent's namespace.
func openGrants(c *Config, rdb redis.UniversalClient, audit auditLog) (mcp.GrantStore, error) {
	if b, ok := audit.(*mcp.BoltAudit); ok {
		return b.Grants(), nil
	}
	return mcp.NewRedisGrants(rdb, c.Store.Namespace)
}

// ExplainToolCall says what the agent's policy would decide of prop, without
// running anything and without connecting to an MCP server: the contracts
// and rules of this config, the canonical arguments and resources, as a
// real call would see them (see [mcp.Explain]; the call's inputSchema is
// not checked, as it needs the server).
func (c *Config) ExplainToolCall(prop mcp.Proposal) (mcp.Explanation, error) {
	return mcp.Explain(toolContracts(c), prop, mcp.WithPolicy(c.Policy.Rules...))
}

// CheckPolicy reports what the policy gets wrong without being invalid:
// rules of one layer that overlap with different decisions, rules no
// configured tool can match, rules a higher one always beats (see
// [policy.Check]). The tools are the contracts' and the mcp skills'.
func (c *Config) CheckPolicy() ([]policy.Finding, error) {
	p, err := policy.New(c.Policy.Rules, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: policy: %w", c.path, err)
	}
	var tools []policy.Tool
	for _, tc := range c.ToolContracts {
		t := policy.Tool{Name: tc.Tool}
		for _, r := range tc.Resources {
			t.Kinds = append(t.Kinds, r.Kind)
		}
		tools = append(tools, t)
	}
	for _, s := range c.Skills {
		if s.Tool != "" {
			tools = append(tools, policy.Tool{Name: s.Tool})
		}
	}
	return policy.Check(p, tools), nil
}
