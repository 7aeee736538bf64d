package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
	"github.com/handoff-a2a/handoff/push"
)

// PolicyConfig is the policy section: rules in fixed layers that decide
// every tool call, whoever proposes it (package mcp/policy documents the
// layers and each field of a rule).
type PolicyConfig struct {
	// Rules are tried by layer, highest first; see [policy.Rule].
	Rules []policy.Rule `yaml:"rules"`
	// Hooks run at fixed points of every tool call, task and gate
	// decision, those of one point in the order given.
	Hooks []HookConfig `yaml:"hooks"`
}

// HookConfig is one hook (see [mcp.Hook]): a command, or an http URL
// reached through the push SSRF guard (push.allow_hosts applies).
type HookConfig struct {
	// Name names the hook in reasons and logs; unique.
	Name string `yaml:"name"`
	// Point is pre_tool_call (a guard, fails closed), or an observer's
	// (fails open): post_tool_call, task_created, task_finished,
	// gate_decided.
	Point string `yaml:"point"`
	// Command runs the hook as a process, the event as JSON on its stdin.
	Command string `yaml:"command"`
	// Args are Command's arguments, passed as they are, never expanded.
	Args []string `yaml:"args"`
	// Env sets the process's variables; ${VAR} expands from the agent's
	// environment, as an MCP stdio server's does.
	Env map[string]string `yaml:"env"`
	// InheritEnv names the agent's variables the process sees besides
	// PATH; nothing else leaks. Default none.
	InheritEnv []string `yaml:"inherit_env"`
	// URL makes it an http hook: the event is POSTed as JSON.
	URL string `yaml:"url"`
	// Timeout bounds one run. Default 5s.
	Timeout *Duration `yaml:"timeout"`
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
	seen := map[string]bool{}
	for i, h := range c.Policy.Hooks {
		key := fmt.Sprintf("policy.hooks[%d]", i)
		if h.Name == "" {
			bad(key+".name", "is required")
		} else if seen[h.Name] {
			bad(key+".name", "%q is used twice", h.Name)
		}
		seen[h.Name] = true
		if !slices.Contains(hookPoints, mcp.HookPoint(h.Point)) {
			bad(key+".point", "%q is not one of pre_tool_call, post_tool_call, task_created, task_finished, gate_decided", h.Point)
		}
		switch {
		case (h.Command == "") == (h.URL == ""):
			bad(key, "give a command or a url, one of them")
		case h.URL != "":
			if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(key+".url", "is not an absolute http(s) URL")
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

// hookPoints are the points a hook may name, in the order a call, a task
// and a delegation meet them.
var hookPoints = []mcp.HookPoint{mcp.HookPreToolCall, mcp.HookPostToolCall, mcp.HookTaskCreated, mcp.HookTaskFinished, mcp.HookGateDecided}

// configHooks are c's hooks at points, in config order.
func configHooks(c *Config, points ...mcp.HookPoint) []mcp.Hook {
	var hooks []mcp.Hook
	for _, h := range c.Policy.Hooks {
		if !slices.Contains(points, mcp.HookPoint(h.Point)) {
			continue
		}
		mh := mcp.Hook{Name: h.Name, Point: mcp.HookPoint(h.Point), Command: h.Command, Args: h.Args, Env: h.Env,
			InheritEnv: h.InheritEnv, URL: h.URL}
		if h.Timeout != nil {
			mh.Timeout = h.Timeout.Duration
		}
		hooks = append(hooks, mh)
	}
	return hooks
}

// hookClient is the client of c's http hooks: it reaches only what a push
// target may; each run has its own deadline.
func hookClient(c *Config) *http.Client { return push.NewGuard(c.Push.AllowHosts).Client(time.Minute) }

// pipelineOptions are the tool pipeline's options from c: who may approve,
// the policy rules, where grants are kept, and the tool call's hooks.
func pipelineOptions(c *Config, grants mcp.GrantStore, log *slog.Logger) []mcp.PipelineOption {
	return []mcp.PipelineOption{
		mcp.WithApprovers(func(p string) bool { return slices.Contains(c.Approvers, p) }),
		mcp.WithPolicy(c.Policy.Rules...),
		mcp.WithGrants(grants),
		mcp.WithHooks(configHooks(c, mcp.HookPreToolCall, mcp.HookPostToolCall)...),
		mcp.WithHookClient(hookClient(c)),
		mcp.WithLogger(log),
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
// real call would see them, and the hooks it would run (see [mcp.Explain];
// the call's inputSchema is not checked, as it needs the server; no grant
// is consulted).
func (c *Config) ExplainToolCall(prop mcp.Proposal) (mcp.Explanation, error) {
	return c.ExplainToolCallContext(context.Background(), prop, nil)
}

// ExplainToolCallContext is [Config.ExplainToolCall] that also consults,
// read only, the caller's grants in grants (nil: none), as a real call
// consults the agent's store (see [mcp.ExplainContext]).
func (c *Config) ExplainToolCallContext(ctx context.Context, prop mcp.Proposal, grants mcp.GrantStore) (mcp.Explanation, error) {
	opts := []mcp.PipelineOption{mcp.WithPolicy(c.Policy.Rules...),
		mcp.WithHooks(configHooks(c, mcp.HookPreToolCall, mcp.HookPostToolCall)...), mcp.WithHookClient(hookClient(c))}
	if grants != nil {
		opts = append(opts, mcp.WithGrants(grants))
	}
	return mcp.ExplainContext(ctx, toolContracts(c), prop, opts...)
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
