package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// policyYAML is an agent whose one skill reads a note through the policy section given.
func policyYAML(mcpBin, policy string) string {
	return fmt.Sprintf(policyConfig, mcpBin) + policy
}

// notesPolicy puts notes under payments/ off limits, whatever path reaches them.
const notesPolicy = `policy:
  rules:
    - {id: payments-off-limits, layer: resource, paths: [payments], reason: payments notes are off limits}
    - {id: reads, layer: allow, tools: ["notes__read_*"]}
`

const policyConfig = `name: Notes
description: notes behind a policy
log: {level: error}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: none, resources: [{pointer: /name, kind: path}]}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
`

// TestPolicyExplainMatchesARealCall: handoff policy explain gives the decision, rule and
// version that a real call of the same arguments through the running agent got, as its
// audit record names them.
func TestPolicyExplainMatchesARealCall(t *testing.T) {
	dir := t.TempDir()
	mcpBin := filepath.Join(dir, "mcpserver")
	if out, err := exec.Command("go", "build", "-o", mcpBin, "../../examples/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("build mcpserver: %v\n%s", err, out)
	}
	yaml := policyYAML(mcpBin, notesPolicy)
	cfgPath := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ := serveHandoff(t, filepath.Join(dir, "data"), yaml)

	for i, tc := range []struct{ name, rule, verdict string }{
		{"./drafts/../payments/q1", "payments-off-limits", "deny"},
		{"welcome", "reads", "allow"},
	} {
		taskID := sendText(t, url, fmt.Sprintf("m%d", i), tc.name)
		var out bytes.Buffer
		if err := run(t.Context(), []string{"audit", url, "--task", taskID, "--json"}, &out, &out); err != nil {
			t.Fatalf("audit: %v\n%s", err, out.String())
		}
		var rec mcp.AuditRecord
		if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
			t.Fatalf("audit record %q: %v", out.String(), err)
		}
		out.Reset()
		args, _ := json.Marshal(map[string]string{"name": tc.name})
		if err := run(t.Context(), []string{"policy", "explain", "--config", cfgPath, "--tool", "notes__read_note", "--args", string(args), "--json"}, &out, &out); err != nil {
			t.Fatalf("explain: %v\n%s", err, out.String())
		}
		var x mcp.Explanation
		if err := json.Unmarshal(out.Bytes(), &x); err != nil {
			t.Fatalf("explanation %q: %v", out.String(), err)
		}
		if rec.Rule != tc.rule || string(rec.Decision) != tc.verdict || x.Rule != rec.Rule || string(x.Verdict) != string(rec.Decision) ||
			x.Layer != rec.Layer || x.Version != rec.PolicyVersion || rec.PolicyVersion == "" {
			t.Fatalf("%s: the call was decided %s by %s (%s, version %s); explain says %s by %s (%s, version %s)", tc.name,
				rec.Decision, rec.Rule, rec.Layer, rec.PolicyVersion, x.Verdict, x.Rule, x.Layer, x.Version)
		}
		if len(x.Resources) != 1 || len(rec.Resources) != 1 || x.Resources[0] != rec.Resources[0] {
			t.Fatalf("resources: explain %+v, audit %+v", x.Resources, rec.Resources)
		}
	}

	// The text form names the rule and the canonical resource.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"policy", "explain", "--config", cfgPath, "--tool", "notes__read_note", "--args", `{"name":"a/../payments/x"}`}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"decision: deny", "rule: payments-off-limits (layer resource)", "payments/x", "reads"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain output lacks %q:\n%s", want, out.String())
		}
	}
}

// sendText sends one text message to the agent's JSON-RPC endpoint and returns the task id.
func sendText(t *testing.T, url, messageID, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message": map[string]any{"messageId": messageID, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}}})
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/a2a/jsonrpc", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		} `json:"result"`
		Error any `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.Task.ID == "" {
		t.Fatalf("send %q: %v, error %v", text, err, out.Error)
	}
	return out.Result.Task.ID
}

// TestPolicyCheck: check validates like serve, and reports conflicts and rules that never
// match with a non-zero exit.
func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(policy string) string {
		p := filepath.Join(dir, "agent.yaml")
		yaml := policyYAML("/bin/true", policy)
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"policy", "check", "--config", write(notesPolicy)}, &out, &out); err != nil {
		t.Fatalf("a clean policy: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "policy ok") {
		t.Fatalf("output %q", out.String())
	}

	out.Reset()
	err := run(t.Context(), []string{"policy", "check", "--config", write(`policy:
  rules:
    - {id: allow-reads, layer: allow, tools: ["notes__*"]}
    - {id: ask-reads, layer: allow, decision: ask, tools: ["notes__read_note"]}
    - {id: gone, layer: allow, tools: ["mail__send"]}
`)}, &out, &out)
	if err == nil || !strings.Contains(out.String(), "conflict") || !strings.Contains(out.String(), "never_matches") || !strings.Contains(out.String(), "gone") {
		t.Fatalf("check: %v\n%s", err, out.String())
	}

	out.Reset()
	err = run(t.Context(), []string{"policy", "check", "--config", write("policy:\n  rules:\n    - {id: x, layer: sideways}\n")}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "agent.yaml:") || !strings.Contains(err.Error(), "policy.rules[0].layer") {
		t.Fatalf("an invalid rule: %v", err)
	}
}

// TestPolicyGrants: grants stored beside a stopped agent's audit log are listed and revoked.
func TestPolicyGrants(t *testing.T) {
	dir := t.TempDir()
	audit, err := mcp.OpenBoltAudit(filepath.Join(dir, datadir.AuditLog))
	if err != nil {
		t.Fatal(err)
	}
	g := policy.Grant{ID: "g1", Scope: policy.ScopeResource, Approver: "key:alice", Principal: "key:bob", Tool: "fs__write",
		Resource: "exports", Created: time.Now(), Expires: time.Now().Add(time.Hour)}
	if err := audit.Grants().PutGrant(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	audit.Close()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"policy", "grants", "--data-dir", dir}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"g1", "scope", "key:bob", "fs__write", "exports", "key:alice"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("listing lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(t.Context(), []string{"policy", "grants", "--data-dir", dir, "--revoke", "g1"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := run(t.Context(), []string{"policy", "grants", "--data-dir", dir, "--revoke", "g1"}, &out, &out); !errors.Is(err, mcp.ErrGrantNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"policy", "grants", "--data-dir", dir}, &out, &out); err != nil || !strings.Contains(out.String(), "no grants") {
		t.Fatalf("after revoke: %v %s", err, out.String())
	}
}
