package mcp_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
)

var writeLow = mcp.Contract{Effect: mcp.EffectWrite, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}

// TestIdempotencyKeys: the key a call carries follows its contract's scope.
func TestIdempotencyKeys(t *testing.T) {
	m := exampleManager(t)
	scoped := func(s mcp.IdempotencyScope) mcp.Contract { c := writeLow; c.Idempotency = s; return c }
	h := newHarness(t, m, []mcp.Contract{
		contract("ex__write_note", writeLow), // default for a write: task
		contract("ex__read_note", readLow),   // default for a read: none
		contract("ex__stats", func() mcp.Contract { c := readLow; c.Idempotency = mcp.IdempotencyArguments; return c }()),
		contract("ex__list_notes", scoped(mcp.IdempotencyNone)),
	})
	key := func(task, tool string, args map[string]any) string {
		t.Helper()
		r := h.run(t, mcp.Proposal{TaskID: task, Tool: tool, Arguments: args}, nil)
		wantOutcome(t, r, mcp.OutcomeSuccess)
		if rec := h.record(t, r); rec.IdempotencyKey != r.IdempotencyKey {
			t.Fatalf("audited key %q, result key %q", rec.IdempotencyKey, r.IdempotencyKey)
		}
		return r.IdempotencyKey
	}
	a := map[string]any{"name": "k", "text": "a"}
	b := map[string]any{"name": "k", "text": "b"}

	k1 := key("t1", "ex__write_note", a)
	if len(k1) != 64 {
		t.Fatalf("write key %q, want hex SHA-256", k1)
	}
	if again := key("t1", "ex__write_note", map[string]any{"text": "a", "name": "k"}); again != k1 {
		t.Errorf("same task and arguments: key %s, then %s", k1, again)
	}
	if other := key("t1", "ex__write_note", b); other == k1 {
		t.Error("task scope: other arguments share the key")
	}
	if other := key("t2", "ex__write_note", a); other == k1 {
		t.Error("task scope: another task shares the key")
	}
	if k := key("t1", "ex__read_note", map[string]any{"name": "welcome"}); k != "" {
		t.Errorf("a read without idempotency carries key %q", k)
	}
	if k := key("t1", "ex__list_notes", nil); k != "" {
		t.Errorf("scope none carries key %q", k)
	}
	s1, s2 := key("t1", "ex__stats", nil), key("t2", "ex__stats", nil)
	if s1 == "" || s1 != s2 {
		t.Errorf("arguments scope: keys %q and %q, want one key across tasks", s1, s2)
	}
	if s3 := key("t1", "ex__stats", map[string]any{"break": false}); s3 == s1 {
		t.Error("arguments scope: other arguments share the key")
	}
}

// TestIdempotentRerun: a write re-run after its approval (as after unknown_outcome) carries
// the same key, and the example server, which honours it, does not write twice; without a
// key it does.
func TestIdempotentRerun(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events")
	m := start(t, []mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer, Args: []string{"--events", events}}})
	waitReady(t, m, "ex")
	noKey := writeLow
	noKey.Idempotency = mcp.IdempotencyNone
	h := newHarness(t, m, []mcp.Contract{
		contract("ex__write_note", mcp.Contract{Effect: mcp.EffectWrite, Risk: mcp.RiskHigh, Approval: mcp.ApprovalMandatory}),
	}, mcp.WithApprovers(approvers("alice")))

	prop := mcp.Proposal{TaskID: "t1", Tool: "ex__write_note", Arguments: map[string]any{"name": "n", "text": "first"}}
	ask := h.run(t, prop, nil)
	wantOutcome(t, ask, mcp.OutcomeApprovalRequired)
	if ask.IdempotencyKey != "" {
		t.Fatalf("a call that did not run reports key %q", ask.IdempotencyKey)
	}
	prop.SnapshotVersion = ask.Approval.SnapshotVersion
	ok := &mcp.Approval{Approver: "alice", Tool: prop.Tool, SnapshotVersion: ask.Approval.SnapshotVersion,
		Digest: ask.Approval.Digest, Token: ask.Approval.Token}
	first := h.run(t, prop, ok)
	wantOutcome(t, first, mcp.OutcomeSuccess)
	if got := noteText(t, m, "n"); got != "first" {
		t.Fatalf("note n is %q after the approved write", got)
	}

	// Someone else changes the note; then the same approved call runs again.
	changed := call(t, m, mcp.CallRequest{Tool: "ex__write_note", Arguments: map[string]any{"name": "n", "text": "changed"}})
	want(t, changed, mcp.OutcomeSuccess)
	again := h.run(t, prop, ok)
	wantOutcome(t, again, mcp.OutcomeSuccess)
	if again.IdempotencyKey == "" || again.IdempotencyKey != first.IdempotencyKey {
		t.Fatalf("re-run key %q, first key %q", again.IdempotencyKey, first.IdempotencyKey)
	}
	if got := noteText(t, m, "n"); got != "changed" {
		t.Fatalf("the re-run wrote again: note n is %q", got)
	}
	log, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "key="+first.IdempotencyKey); n != 2 {
		t.Fatalf("the server saw the key %d times, want 2:\n%s", n, log)
	}

	// Without a key the same write runs every time.
	plain := contract("ex__write_note", noKey)
	h2 := newHarness(t, m, []mcp.Contract{plain})
	p2 := mcp.Proposal{TaskID: "t2", Tool: "ex__write_note", Arguments: map[string]any{"name": "n", "text": "second"}}
	wantOutcome(t, h2.run(t, p2, nil), mcp.OutcomeSuccess)
	want(t, call(t, m, mcp.CallRequest{Tool: "ex__write_note", Arguments: map[string]any{"name": "n", "text": "changed"}}), mcp.OutcomeSuccess)
	r := h2.run(t, p2, nil)
	wantOutcome(t, r, mcp.OutcomeSuccess)
	if r.IdempotencyKey != "" {
		t.Fatalf("scope none sent key %q", r.IdempotencyKey)
	}
	if got := noteText(t, m, "n"); got != "second" {
		t.Fatalf("without a key the write did not run again: note n is %q", got)
	}
}
