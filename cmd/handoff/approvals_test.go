package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// startApprovalsAgent serves an agent whose write-note skill needs an
// approval: alice asks, ops approves.
func startApprovalsAgent(t *testing.T) string {
	t.Helper()
	return startApprovalsAgentWith(t, `tool_contracts:
  - {tool: notes__write_note, effect: write, risk: high, approval: mandatory, redact: [text]}
`)
}

// startApprovalsAgentWith is startApprovalsAgent with its own tool
// contracts and policy.
func startApprovalsAgentWith(t *testing.T, governance string) string {
	t.Helper()
	mcpBin := filepath.Join(t.TempDir(), "mcpserver")
	if out, err := exec.Command("go", "build", "-o", mcpBin, "../../examples/mcpserver").CombinedOutput(); err != nil {
		t.Fatalf("build the example MCP server: %v\n%s", err, out)
	}
	url, _ := serveHandoff(t, t.TempDir(), fmt.Sprintf(`name: Notes
description: notes
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  api_keys: [{name: alice, sha256: %s}, {name: ops, sha256: %s}]
approvers: ["key:ops"]
mcp_servers: [{name: notes, command: %q}]
skills:
  - {id: write-note, name: Write, executor: mcp, tool: notes__write_note}
`+governance, auth.HashAPIKey("alice-key"), auth.HashAPIKey("ops-key"), mcpBin))
	return url
}

// askToWrite sends alice's write-note request and returns its task, which
// waits for an approval.
func askToWrite(t *testing.T, url, name string) *a2a.Task {
	t.Helper()
	task := sendTask(t, url, "write", "--skill", "write-note", "--data", fmt.Sprintf(`{"name":%q,"text":"secret text"}`, name),
		"--api-key", "alice-key")
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("write: %s, want input-required", task.Status.State)
	}
	return task
}

// TestApproveCompletesWaitingTask: "handoff approvals" lists alice's
// waiting call to the approver, with its redacted arguments and risk, and
// "handoff approve" completes the task.
func TestApproveCompletesWaitingTask(t *testing.T) {
	url := startApprovalsAgent(t)
	task := askToWrite(t, url, "n1")

	out := mustRun(t, "approvals", url, "--api-key", "ops-key")
	for _, want := range []string{string(task.ID), "notes__write_note", "high write", "key:alice"} {
		if !strings.Contains(out, want) {
			t.Errorf("approvals lacks %q:\n%s", want, out)
		}
	}
	list := decodeLines[pendingApproval](t, mustRun(t, "approvals", url, "--api-key", "ops-key", "--json"))
	if len(list) != 1 || list[0].Arguments["text"] != "[REDACTED]" || list[0].Arguments["name"] != "n1" || list[0].Request != nil {
		t.Errorf("approvals --json: %+v, want one with its text redacted and no request", list)
	}
	if strings.Contains(out, "secret text") {
		t.Errorf("approvals shows a redacted argument:\n%s", out)
	}

	out = mustRun(t, "approve", url, string(task.ID), "--api-key", "ops-key")
	if strings.TrimSpace(out) != fmt.Sprintf("task %s: completed", task.ID) {
		t.Errorf("approve: %q", out)
	}
	got := mustRun(t, "get", url, string(task.ID), "--api-key", "alice-key")
	if !strings.Contains(got, "completed") || !strings.Contains(got, "saved n1") {
		t.Errorf("the approved task:\n%s", got)
	}
	if out := mustRun(t, "approvals", url, "--api-key", "ops-key"); !strings.Contains(out, "nothing waits") {
		t.Errorf("approvals after the approval:\n%s", out)
	}
	audit := mustRun(t, "audit", url, "--api-key", "ops-key", "--task", string(task.ID), "--json")
	if !strings.Contains(audit, `"approver":"key:ops"`) || !strings.Contains(audit, `"outcome":"success"`) {
		t.Errorf("the audit of the approved call:\n%s", audit)
	}
}

// TestApproveScopeGrantsLaterCalls: "handoff approve --scope scope" makes a
// grant: alice's later writes under the granted prefix run without asking,
// one outside it still waits, and a mandatory ask is never widened.
func TestApproveScopeGrantsLaterCalls(t *testing.T) {
	url := startApprovalsAgentWith(t, `tool_contracts:
  - {tool: notes__write_note, effect: write, risk: low, approval: none, resources: [{pointer: /name, kind: path, root: /notes}]}
policy:
  rules: [{id: ask-writes, layer: allow, decision: ask, tools: [notes__write_note]}]
`)
	first := askToWrite(t, url, "team/a")
	if _, _, err := runCLI(t.Context(), "approve", url, string(first.ID), "--scope", "scope", "--api-key", "ops-key"); err == nil || exitCode(err) != 2 {
		t.Errorf("--scope scope without --resource and --expires: %v, want a usage error", err)
	}
	if out := mustRun(t, "approve", url, string(first.ID), "--scope", "scope", "--resource", "team", "--expires", "1h", "--api-key", "ops-key"); strings.TrimSpace(out) != fmt.Sprintf("task %s: completed", first.ID) {
		t.Fatalf("approve --scope scope: %q", out)
	}
	later := sendTask(t, url, "write", "--skill", "write-note", "--data", `{"name":"team/b","text":"t"}`, "--api-key", "alice-key")
	if later.Status.State != a2a.TaskStateCompleted {
		t.Errorf("a write under the granted prefix: %s, want completed without asking", later.Status.State)
	}
	askToWrite(t, url, "elsewhere") // outside the prefix: it waits again
	audit := mustRun(t, "audit", url, "--api-key", "ops-key", "--task", string(later.ID), "--json")
	if !strings.Contains(audit, `"rule":"grant:`) || !strings.Contains(audit, `"outcome":"success"`) {
		t.Errorf("the audit of the granted call names no grant:\n%s", audit)
	}
}

// TestDenyFailsWaitingTask: "handoff deny" fails the task with the
// approver's reason, the tool never runs, and the denial is audited with
// the approver's name; the owner, who is no approver, can neither approve
// nor deny.
func TestDenyFailsWaitingTask(t *testing.T) {
	url := startApprovalsAgent(t)
	task := askToWrite(t, url, "n2")

	if _, _, err := runCLI(t.Context(), "approve", url, string(task.ID), "--api-key", "alice-key"); err == nil ||
		!strings.Contains(err.Error(), "may not approve") {
		t.Errorf("alice approves her own call: %v", err)
	}
	if _, _, err := runCLI(t.Context(), "deny", url, string(task.ID), "--api-key", "ops-key"); err == nil || exitCode(err) != 2 {
		t.Errorf("deny without --reason: %v, want a usage error", err)
	}
	out := mustRun(t, "deny", url, string(task.ID), "--reason", "not on a Friday", "--api-key", "ops-key")
	if strings.TrimSpace(out) != fmt.Sprintf("task %s: failed", task.ID) {
		t.Errorf("deny: %q", out)
	}
	got := mustRun(t, "get", url, string(task.ID), "--api-key", "alice-key")
	if !strings.Contains(got, "failed") || !strings.Contains(got, "denied by key:ops: not on a Friday") || strings.Contains(got, "saved n2") {
		t.Errorf("the denied task:\n%s", got)
	}
	audit := mustRun(t, "audit", url, "--api-key", "ops-key", "--task", string(task.ID), "--json")
	if !strings.Contains(audit, `"approver":"key:ops"`) || !strings.Contains(audit, `"outcome":"permission_denied"`) ||
		!strings.Contains(audit, "not on a Friday") {
		t.Errorf("the audit of the denied call:\n%s", audit)
	}
	if _, _, err := runCLI(t.Context(), "approve", url, string(task.ID), "--api-key", "ops-key"); err == nil ||
		!strings.Contains(err.Error(), "waits for no approval") {
		t.Errorf("approve after the denial: %v", err)
	}
}
