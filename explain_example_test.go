package handoff_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// A scope grant lets bob's deletes under tmp/ through without asking; explaining the call
// with the grants consults it, as the running agent would, and names the hooks it would run.
func ExampleConfig_ExplainToolCallContext() {
	cfg, err := handoff.ParseConfig("agent.yaml", strings.NewReader(`name: Files
description: files
auth: {anonymous: true}
skills: [{id: s, name: S, executor: tck}]
tool_contracts:
  - {tool: fs__delete, effect: destructive, risk: high, approval: none, resources: [{pointer: /path, kind: path}]}
policy:
  hooks: [{name: siem, point: post_tool_call, command: /usr/local/bin/siem}]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "explain")
	defer os.RemoveAll(dir)
	audit, err := mcp.OpenBoltAudit(filepath.Join(dir, "audit.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer audit.Close()
	_ = audit.Grants().PutGrant(context.Background(), policy.Grant{ID: "g1", Scope: policy.ScopeResource, Approver: "key:ops",
		Principal: "key:bob", Tool: "fs__delete", Resource: "tmp", Created: time.Now(), Expires: time.Now().Add(time.Hour)})

	prop := mcp.Proposal{Principal: "key:bob", Tool: "fs__delete", Arguments: map[string]any{"path": "tmp/../tmp/old.log"}}
	for _, grants := range []mcp.GrantStore{nil, audit.Grants()} {
		x, err := cfg.ExplainToolCallContext(context.Background(), prop, grants)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(x.Verdict, x.Rule, x.Layer, x.Hooks[0].Name)
	}
	// Output:
	// ask builtin:default-ask default siem
	// allow grant:g1 grant siem
}
