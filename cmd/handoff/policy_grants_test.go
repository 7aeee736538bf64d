package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// TestPolicyGrantsOnRedisAndExplain: an agent on Redis keeps the scope grant an approver
// gave; handoff policy explain, reading the grants the config's store holds, decides a
// later call as the running agent did (the grant's rule, layer and version, as its audit
// record names them) and names the hooks the call runs; --no-grants explains the rules
// alone. handoff policy grants --config lists and revokes the grant on Redis, after which
// explain asks again.
func TestPolicyGrantsOnRedisAndExplain(t *testing.T) {
	dir := t.TempDir()
	mcpBin := filepath.Join(dir, "mcpserver")
	if out, err := exec.Command("go", "build", "-o", mcpBin, "../../examples/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("build the example MCP server: %v\n%s", err, out)
	}
	secret := filepath.Join(dir, "store.key")
	if err := os.WriteFile(secret, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`name: Notes
description: notes
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  api_keys: [{name: alice, sha256: %s}, {name: ops, sha256: %s}]
approvers: ["key:ops"]
store: {kind: redis, url: %q, namespace: %q, secret_key_files: [%q]}
mcp_servers: [{name: notes, command: %q}]
skills:
  - {id: write-note, name: Write, executor: mcp, tool: notes__write_note}
tool_contracts:
  - {tool: notes__write_note, effect: write, risk: low, approval: none, resources: [{pointer: /name, kind: path, root: /notes}]}
policy:
  rules: [{id: ask-writes, layer: allow, decision: ask, tools: [notes__write_note]}]
  hooks:
    - {name: guard, point: pre_tool_call, command: /bin/true}
    - {name: watch, point: post_tool_call, command: /bin/true}
    - {name: done, point: task_finished, command: /bin/true}
`, auth.HashAPIKey("alice-key"), auth.HashAPIKey("ops-key"), redistest.URL, redistest.Namespace(t, "cligrants"), secret, mcpBin)
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ := serveHandoff(t, filepath.Join(dir, "data"), yaml)
	explain := func(extra ...string) mcp.Explanation {
		t.Helper()
		var x mcp.Explanation
		out := mustRun(t, append([]string{"policy", "explain", "--config", cfgPath, "--tool", "notes__write_note",
			"--args", `{"name":"team/b","text":"t"}`, "--caller", "key:alice", "--json"}, extra...)...)
		if err := json.Unmarshal([]byte(out), &x); err != nil {
			t.Fatalf("explanation %q: %v", out, err)
		}
		return x
	}
	if x := explain(); x.Rule != "ask-writes" || x.Verdict != policy.Ask {
		t.Fatalf("before any grant: %s by %s, want ask by ask-writes", x.Verdict, x.Rule)
	}

	first := askToWrite(t, url, "team/a")
	mustRun(t, "approve", url, string(first.ID), "--scope", "scope", "--resource", "team", "--expires", "1h", "--api-key", "ops-key")
	later := sendTask(t, url, "write", "--skill", "write-note", "--data", `{"name":"team/b","text":"t"}`, "--api-key", "alice-key")
	if later.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("a write under the granted prefix: %s, want completed", later.Status.State)
	}
	var rec mcp.AuditRecord
	if err := json.Unmarshal([]byte(mustRun(t, "audit", url, "--api-key", "ops-key", "--task", string(later.ID), "--json")), &rec); err != nil {
		t.Fatal(err)
	}
	x := explain()
	if !strings.HasPrefix(rec.Rule, "grant:") || x.Rule != rec.Rule || string(x.Verdict) != string(rec.Decision) || x.Layer != rec.Layer ||
		x.Version != rec.PolicyVersion {
		t.Fatalf("the call was decided %s by %s (%s, version %s); explain says %s by %s (%s, version %s)",
			rec.Decision, rec.Rule, rec.Layer, rec.PolicyVersion, x.Verdict, x.Rule, x.Layer, x.Version)
	}
	if want := []mcp.ExplainedHook{{Name: "guard", Point: mcp.HookPreToolCall}, {Name: "watch", Point: mcp.HookPostToolCall}}; fmt.Sprint(x.Hooks) != fmt.Sprint(want) {
		t.Errorf("explain's hooks %+v, want %+v", x.Hooks, want)
	}
	text := mustRun(t, "policy", "explain", "--config", cfgPath, "--tool", "notes__write_note", "--args", `{"name":"team/b"}`, "--caller", "key:alice")
	for _, want := range []string{"decision: allow", "rule: " + rec.Rule + " (layer grant)", "hooks: guard (pre_tool_call), watch (post_tool_call); not run"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain's text lacks %q:\n%s", want, text)
		}
	}
	if x := explain("--no-grants"); x.Rule != "ask-writes" {
		t.Errorf("--no-grants: decided by %s, want ask-writes", x.Rule)
	}

	id := strings.TrimPrefix(rec.Rule, "grant:")
	list := mustRun(t, "policy", "grants", "--config", cfgPath)
	for _, want := range []string{id, "scope", "key:alice", "notes__write_note", "team", "key:ops"} {
		if !strings.Contains(list, want) {
			t.Errorf("the grants on Redis lack %q:\n%s", want, list)
		}
	}
	if gs := decodeLines[policy.Grant](t, mustRun(t, "policy", "grants", "--config", cfgPath, "--json")); len(gs) != 1 || gs[0].ID != id {
		t.Errorf("grants --json: %+v", gs)
	}
	mustRun(t, "policy", "grants", "--config", cfgPath, "--revoke", id)
	if _, _, err := runCLI(t.Context(), "policy", "grants", "--config", cfgPath, "--revoke", id); !errors.Is(err, mcp.ErrGrantNotFound) {
		t.Errorf("second revoke: %v", err)
	}
	if out := mustRun(t, "policy", "grants", "--config", cfgPath); !strings.Contains(out, "no grants") {
		t.Errorf("after the revoke:\n%s", out)
	}
	if x := explain(); x.Rule != "ask-writes" {
		t.Errorf("after the revoke: decided by %s, want ask-writes", x.Rule)
	}
	if _, _, err := runCLI(t.Context(), "policy", "grants", "--store", redistest.URL); err == nil || exitCode(err) != 2 {
		t.Errorf("--store without --config: %v, want a usage error", err)
	}
}
