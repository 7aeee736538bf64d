package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/auth"
)

// delegatingAgentYAML configures an agent with a delegate skill (its peer
// never answers: the tests read what the ledger holds, not what a peer
// did), a tck skill to make tasks with, the API keys alice (a caller) and
// boss (an approver) in the header X-Agent-Key, named by its card.
func delegatingAgentYAML(t *testing.T) string {
	t.Helper()
	contract := filepath.Join(t.TempDir(), "pay.yaml")
	if err := os.WriteFile(contract, []byte("skill: pay\nversion: \"1\"\nartifacts:\n  receipt: {type: object}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`name: A
description: B
log: {level: error}
limits: {shutdown_grace: 1s}
approvers: ["key:boss"]
auth: {api_key_header: X-Agent-Key, api_keys: [{name: alice, sha256: %s}, {name: boss, sha256: %s}]}
peers: [{name: payments, url: "http://127.0.0.1:9", trust: {jku_prefixes: ["http://127.0.0.1:9/"]}}]
skills:
  - {id: s, name: S, executor: tck}
  - {id: pay, name: Pay, executor: delegate, delegate: {skill: refund, contract: %q}}
`, auth.HashAPIKey("alice-key"), auth.HashAPIKey("boss-key"), contract)
}

// TestLedgerByURL: "handoff ledger URL" lists the commits of the caller's
// own delegations, every one for an approver, newest first and bounded by
// --limit, sending the API key in the header the card names.
func TestLedgerByURL(t *testing.T) {
	t.Setenv("HANDOFF_API_KEY", "")
	t.Setenv("HANDOFF_TOKEN", "")
	dir := t.TempDir()
	yaml := delegatingAgentYAML(t)
	url, stop := serveHandoff(t, dir, yaml)
	events := decodeEvents(t, mustRun(t, "send", url, "hello", "--skill", "s", "--api-key", "alice-key", "--json"))
	task, ok := events[len(events)-1].(*a2a.Task)
	if !ok {
		t.Fatalf("send answered %T", events[len(events)-1])
	}
	stop()

	// The ledger as delegations of alice's task (a delegate skill's, keyed
	// by the task, and a Go executor's, keyed TASK#SKILL-N) and one of a
	// task she does not own would have left it (the agent holds the file
	// while it runs).
	l, err := acceptance.OpenBoltLedger(filepath.Join(dir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i, id := range []string{string(task.ID), string(task.ID) + "#pay-1", "someone-elses"} {
		if _, err := l.Commit(context.Background(), &acceptance.Entry{DelegationID: id, Skill: "pay", ContractVersion: "1",
			EvidenceDigests: map[string]string{"receipt": "sha256:0123456789abcdef"}, CommittedAt: now.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	url, _ = serveHandoff(t, dir, yaml)

	ids := func(args ...string) string {
		t.Helper()
		var got []string
		for _, e := range decodeLines[acceptance.Entry](t, mustRun(t, append([]string{"ledger", url, "--json"}, args...)...)) {
			got = append(got, e.DelegationID)
		}
		return strings.Join(got, " ")
	}
	if got, want := ids("--api-key", "alice-key"), string(task.ID)+"#pay-1 "+string(task.ID); got != want {
		t.Errorf("alice sees %q, want her own delegations %q", got, want)
	}
	if got, want := ids("--api-key", "boss-key"), "someone-elses "+string(task.ID)+"#pay-1 "+string(task.ID); got != want {
		t.Errorf("the approver sees %q, want all, newest first: %q", got, want)
	}
	if got := ids("--api-key", "boss-key", "--limit", "1"); got != "someone-elses" {
		t.Errorf("--limit 1 gives %q, want the newest", got)
	}
	if out := mustRun(t, "ledger", url, "--api-key", "alice-key"); !strings.Contains(out, string(task.ID)) || !strings.Contains(out, "receipt=sha256:01234") {
		t.Errorf("table:\n%s", out)
	}
	if _, _, err := runCLI(t.Context(), "ledger", url); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without a key: %v, want 401", err)
	}
	if _, _, err := runCLI(t.Context(), "ledger", url, "--data-dir", dir); exitCode(err) != 2 {
		t.Errorf("URL and --data-dir: %v, want a usage error", err)
	}
}

// TestAdminCommandsCardHeader: the commands that read an agent's own
// endpoints send the API key in the header its card names, as the A2A
// commands do, not in a fixed X-API-Key, and check the card with --trust,
// which they used to accept and ignore.
func TestAdminCommandsCardHeader(t *testing.T) {
	t.Setenv("HANDOFF_API_KEY", "")
	t.Setenv("HANDOFF_TOKEN", "")
	url, _ := serveHandoff(t, t.TempDir(), delegatingAgentYAML(t))
	for _, cmd := range []string{"push status", "delegations", "ledger"} {
		args := append(strings.Fields(cmd), url, "--api-key", "alice-key")
		if out, errOut, err := runCLI(t.Context(), args...); err != nil {
			t.Errorf("handoff %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		// --trust applies to them as to the A2A commands: the agent signs its
		// card with a key it publishes under its own origin, and no other.
		if _, _, err := runCLI(t.Context(), append(args, "--trust", "origin")...); err != nil {
			t.Errorf("handoff %s --trust origin: %v", strings.Join(args, " "), err)
		}
		other := filepath.Join(t.TempDir(), "other.jwks")
		if err := os.WriteFile(other, []byte(`{"keys":[]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runCLI(t.Context(), append(args, "--trust", other)...); err == nil || !strings.Contains(err.Error(), "not trusted") {
			t.Errorf("handoff %s --trust with other keys: %v, want the card not trusted", strings.Join(args, " "), err)
		}
	}
}
