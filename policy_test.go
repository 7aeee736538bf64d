package handoff

import (
	"fmt"
	"os"
	"path/filepath"
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
		`agent.yaml:11: policy.hooks[1].point: "task_started" is not one of pre_tool_call, post_tool_call, task_created, task_finished, gate_decided`,
		"agent.yaml:12: policy.hooks[2]: give a command or a url",
		"agent.yaml:16: policy.hooks[3].url: is not an absolute http(s) URL",
		`agent.yaml:20: policy.hooks[4].timeout: "soon" is not a duration`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// TestReloadPolicy: a reload replaces the policy for the next task, without a restart
// warning, and the audit names the version that decided each call.
func TestReloadPolicy(t *testing.T) {
	bin := buildMCPServer(t)
	dataDir := t.TempDir()
	config := func(rules string) *Config {
		t.Helper()
		c, err := ParseConfig("policy.yaml", strings.NewReader(fmt.Sprintf(`name: Policy
description: notes
log: {level: info}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: none, resources: [{pointer: /name, kind: path}]}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
policy:
  rules: %s
`, bin, rules)))
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = dataDir
		return c
	}
	var logs syncBuffer
	a, url := serveTools(t, config(`[{id: no-welcome, layer: resource, paths: [welcome]}]`), &logs)
	n := 0
	read := func(name string) string {
		t.Helper()
		n++
		_, out := call(t, url, "", "", "SendMessage",
			fmt.Sprintf(`{"message":{"messageId":"p%d","role":"ROLE_USER","parts":[{"text":%q}]}}`, n, name))
		return state(resultTask(t, out))
	}
	if st := read("./x/../welcome"); st == "TASK_STATE_COMPLETED" {
		t.Fatal("a denied read completed")
	}
	if err := a.Reload(config(`[]`)); err != nil {
		t.Fatal(err)
	}
	if st := read("welcome"); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("read after the deny was removed: %s", st)
	}
	if l := logs.String(); strings.Contains(l, "need a restart") {
		t.Fatalf("a policy change was reported as needing a restart:\n%s", l)
	}
	recs, err := a.tools.audit.List(t.Context(), mcp.AuditFilter{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	if recs[1].Rule != "no-welcome" || recs[0].Rule != policy.RuleContractAllow || recs[0].PolicyVersion == recs[1].PolicyVersion {
		t.Fatalf("records %+v", recs)
	}
}

// TestHooksThroughTheAgent: a configured guard hook that fails refuses the task's call with
// its name in the reason; an observer that fails leaves a call done and logs a line.
func TestHooksThroughTheAgent(t *testing.T) {
	bin := buildMCPServer(t)
	dir := t.TempDir()
	failing := filepath.Join(dir, "failing-hook")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\nexit 7\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := func(point string) *Config {
		t.Helper()
		c, err := ParseConfig("hooks.yaml", strings.NewReader(fmt.Sprintf(`name: Hooks
description: notes
log: {level: info}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: none}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
policy:
  hooks:
    - {name: site-check, point: %s, command: %q, timeout: 5s}
`, bin, point, failing)))
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = filepath.Join(dir, point)
		return c
	}
	read := func(url string) map[string]any {
		t.Helper()
		_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"h1","role":"ROLE_USER","parts":[{"text":"welcome"}]}}`)
		return resultTask(t, out)
	}

	var logs syncBuffer
	a, url := serveTools(t, config("pre_tool_call"), &logs)
	task := read(url)
	if st := state(task); st == "TASK_STATE_COMPLETED" || !strings.Contains(fmt.Sprint(task["status"]), "hook site-check failed") {
		t.Fatalf("a failing guard let the call through: %s %v", st, task["status"])
	}
	recs, err := a.tools.audit.List(t.Context(), mcp.AuditFilter{})
	if err != nil || len(recs) != 1 || recs[0].Hook != "site-check" || recs[0].Outcome != mcp.OutcomePermissionDenied {
		t.Fatalf("records %+v, %v", recs, err)
	}

	var observed syncBuffer
	_, url = serveTools(t, config("post_tool_call"), &observed)
	if st := state(read(url)); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("a failing observer failed the call: %s", st)
	}
	if l := observed.String(); !strings.Contains(l, "observing hook failed") || !strings.Contains(l, "hook=site-check") {
		t.Fatalf("no log line for the failed observer:\n%s", l)
	}
}
