package handoff

import (
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// TestPolicyConfig: the policy section and the contracts' resources are checked at load,
// each problem naming the file, line and key; a good section decides as configured.
func TestPolicyConfig(t *testing.T) {
	_, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+`tool_contracts:
  - {tool: fs__write, effect: write, risk: low, approval: none, resources: [{pointer: path, kind: path}]}
policy:
  rules:
    - {id: a, layer: allow}
    - {id: a, layer: sideways}
    - id: c
      layer: allow
      when: "args.x +"
    - id: d
      layer: allow
      colour: blue
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"agent.yaml:9: tool_contracts[0].resources: resources[0]: pointer",
		`agent.yaml:13: policy.rules[1].id: "a" is also rules[0]'s`,
		"agent.yaml:13: policy.rules[1].layer",
		"agent.yaml:16: policy.rules[2].when",
		"agent.yaml:19: policy.rules[3].colour: is not a known key",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}

	c, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+`tool_contracts:
  - {tool: fs__write, effect: write, risk: low, approval: none, resources: [{pointer: /path, kind: path, root: /srv}]}
policy:
  rules:
    - {id: payments, layer: resource, paths: [payments]}
`))
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.ExplainToolCall(mcp.Proposal{Tool: "fs__write", Arguments: map[string]any{"path": "/srv/exports/../payments/x"}})
	if err != nil || x.Verdict != policy.Deny || x.Rule != "payments" || x.Resources[0].Value != "payments/x" {
		t.Fatalf("explain %+v, %v", x, err)
	}
	if f, err := c.CheckPolicy(); err != nil || len(f) != 0 {
		t.Fatalf("check %+v, %v", f, err)
	}
}

// TestHookConfig: invalid hooks stop the load with file, line and key.
func TestHookConfig(t *testing.T) {
	_, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+`policy:
  hooks:
    - {name: guard, point: pre_tool_call, command: /bin/true}
    - {name: guard, point: task_started, command: /bin/true}
    - name: both
      point: post_tool_call
      command: /bin/true
      url: https://hooks.example/x
    - {name: web, point: post_tool_call, url: "ftp://x"}
    - name: slow
      point: pre_tool_call
      command: x
      timeout: soon
`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`agent.yaml:11: policy.hooks[1].name: "guard" is used twice`,
		`agent.yaml:11: policy.hooks[1].point: "task_started" is not pre_tool_call or post_tool_call`,
		"agent.yaml:12: policy.hooks[2]: give a command or a url",
		"agent.yaml:16: policy.hooks[3].url: is not an absolute http(s) URL",
		`agent.yaml:20: policy.hooks[4].timeout: "soon" is not a duration`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
