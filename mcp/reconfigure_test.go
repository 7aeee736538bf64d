package mcp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
)

// pidOf reads the pid file an example server wrote.
func pidOf(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestReconfigure: an unchanged server keeps its session, a new one starts, a removed one
// is stopped and its tools leave the catalog, a changed one restarts, and a bad set of
// configs changes nothing.
func TestReconfigure(t *testing.T) {
	dir := t.TempDir()
	pidA, pidB := filepath.Join(dir, "a.pid"), filepath.Join(dir, "b.pid")
	a := mcp.ServerConfig{Name: "a", Transport: mcp.TransportStdio, Command: exampleServer, Args: []string{"--pid-file", pidA}}
	b := mcp.ServerConfig{Name: "b", Transport: mcp.TransportStdio, Command: exampleServer, Args: []string{"--pid-file", pidB}}
	m := start(t, []mcp.ServerConfig{a})
	waitReady(t, m, "a")
	firstA := pidOf(t, pidA)
	planned := m.Snapshot().Version

	t.Run("add", func(t *testing.T) {
		if err := m.Reconfigure([]mcp.ServerConfig{a, b}); err != nil {
			t.Fatal(err)
		}
		waitReady(t, m, "b")
		if _, ok := m.Snapshot().Tool("b__read_note"); !ok {
			t.Fatalf("b's tools are not in the catalog: %v", toolNames(m.Snapshot()))
		}
		if s := status(m, "a"); s.Connects != 1 || pidOf(t, pidA) != firstA {
			t.Fatalf("unchanged server a was restarted: %+v", s)
		}
		want(t, call(t, m, mcp.CallRequest{Tool: "b__list_notes", ReadOnly: true}), mcp.OutcomeSuccess)
	})

	t.Run("refused", func(t *testing.T) {
		before := m.Servers()
		err := m.Reconfigure([]mcp.ServerConfig{a, {Name: "bad__name", Transport: mcp.TransportStdio, Command: "x"}, {Name: "c", Transport: "carrier pigeon"}})
		if err == nil || !strings.Contains(err.Error(), "bad__name") || !strings.Contains(err.Error(), "carrier pigeon") {
			t.Fatalf("Reconfigure with bad configs: %v", err)
		}
		if after := m.Servers(); len(after) != len(before) || status(m, "b").State != mcp.StateReady {
			t.Fatalf("a refused reconfigure changed the servers: %+v", after)
		}
	})

	t.Run("remove and change", func(t *testing.T) {
		firstB := pidOf(t, pidB)
		changed := b
		changed.Args = append(slices.Clone(b.Args), "--page-size", "2")
		if err := os.Remove(pidB); err != nil {
			t.Fatal(err)
		}
		if err := m.Reconfigure([]mcp.ServerConfig{changed}); err != nil {
			t.Fatal(err)
		}
		if names := toolNames(m.Snapshot()); slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "a__") }) {
			t.Fatalf("a's tools are still in the catalog: %v", names)
		}
		r := call(t, m, mcp.CallRequest{Tool: "a__read_note", SnapshotVersion: planned, Arguments: map[string]any{"name": "welcome"}, ReadOnly: true})
		want(t, r, mcp.OutcomeUnavailableTool)
		// Reconfigure returned after a's supervisor ended: its process is gone.
		if err := syscall.Kill(firstA, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("removed server's process %d: %v, want it gone", firstA, err)
		}
		if len(m.Servers()) != 1 {
			t.Fatalf("servers after removing a: %+v", m.Servers())
		}
		waitReady(t, m, "b")
		poll(t, "b restarted", func() bool { _, err := os.Stat(pidB); return err == nil })
		if pidOf(t, pidB) == firstB {
			t.Fatal("changed server b kept its process")
		}
		if err := syscall.Kill(firstB, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("changed server's old process %d: %v, want it gone", firstB, err)
		}
		want(t, call(t, m, mcp.CallRequest{Tool: "b__read_note", Arguments: map[string]any{"name": "welcome"}, ReadOnly: true}), mcp.OutcomeSuccess)
	})
}

// TestReconfigureBeforeRun: a Manager reconfigured before Run starts the new set.
func TestReconfigureBeforeRun(t *testing.T) {
	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "old", Transport: mcp.TransportStdio, Command: "/nonexistent"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reconfigure([]mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer}}); err != nil {
		t.Fatal(err)
	}
	if s := m.Servers(); len(s) != 1 || s[0].Name != "ex" {
		t.Fatalf("servers %+v", s)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitReady(t, m, "ex")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPipelineReconfigure: new contracts and approvers apply to the next call; an approval
// requested before the reload still verifies; a bad set is refused and the old one stays.
func TestPipelineReconfigure(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{contract("ex__read_note", readLow), writeMandatory}, mcp.WithApprovers(approvers("alice")))
	read := mcp.Proposal{TaskID: "t1", Tool: "ex__read_note", Arguments: map[string]any{"name": "welcome"}}
	wantOutcome(t, h.run(t, read, nil), mcp.OutcomeSuccess)

	write := mcp.Proposal{TaskID: "t2", Tool: "ex__write_note", Arguments: map[string]any{"name": "r", "text": "x"}}
	ask := h.run(t, write, nil) // approval mandatory: asks
	wantOutcome(t, ask, mcp.OutcomeApprovalRequired)
	approval := &mcp.Approval{Tool: write.Tool, SnapshotVersion: ask.Approval.SnapshotVersion, Digest: ask.Approval.Digest, Token: ask.Approval.Token}

	mandatory := readLow
	mandatory.Approval = mcp.ApprovalMandatory
	if err := h.p.Reconfigure([]mcp.Contract{contract("ex__read_note", mandatory), writeMandatory}, mcp.WithApprovers(approvers("carol"))); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, h.run(t, read, nil), mcp.OutcomeApprovalRequired)
	write.SnapshotVersion = ask.Approval.SnapshotVersion
	byAlice := *approval
	byAlice.Approver = "alice"
	if r := h.run(t, write, &byAlice); r.Outcome != mcp.OutcomeApprovalRequired || !strings.Contains(r.Err.Error(), `"alice" may not approve`) {
		t.Fatalf("an approver removed by the reload approved: %s %v", r.Outcome, r.Err)
	}
	byCarol := *approval
	byCarol.Approver = "carol"
	wantOutcome(t, h.run(t, write, &byCarol), mcp.OutcomeSuccess)

	if err := h.p.Reconfigure([]mcp.Contract{{Tool: "ex__read_note", Effect: "sometimes"}}); err == nil {
		t.Fatal("bad contracts accepted")
	}
	wantOutcome(t, h.run(t, read, nil), mcp.OutcomeApprovalRequired) // the reloaded contract stands
	h.records(t)
}

// TestPipelineApproversAskedAtEachApproval: the approver func is asked at every approval, so a
// list it reads can change without Reconfigure; an empty principal is never asked.
func TestPipelineApproversAskedAtEachApproval(t *testing.T) {
	m := exampleManager(t)
	var allowed atomic.Pointer[string]
	var askedEmpty atomic.Bool
	isApprover := func(p string) bool {
		if p == "" {
			askedEmpty.Store(true)
		}
		a := allowed.Load()
		return a != nil && p == *a
	}
	h := newHarness(t, m, []mcp.Contract{writeMandatory}, mcp.WithApprovers(isApprover))
	write := mcp.Proposal{TaskID: "t1", Tool: "ex__write_note", Arguments: map[string]any{"name": "a", "text": "x"}}
	ask := h.run(t, write, nil)
	wantOutcome(t, ask, mcp.OutcomeApprovalRequired)
	write.SnapshotVersion = ask.Approval.SnapshotVersion
	approval := &mcp.Approval{Tool: write.Tool, SnapshotVersion: ask.Approval.SnapshotVersion, Digest: ask.Approval.Digest, Token: ask.Approval.Token}

	byDave := *approval
	byDave.Approver = "dave"
	if r := h.run(t, write, &byDave); r.Outcome != mcp.OutcomeApprovalRequired {
		t.Fatalf("dave approved before he was listed: %s %v", r.Outcome, r.Err)
	}
	anonymous := *approval
	allowed.Store(new(string)) // "" listed: still refused
	if r := h.run(t, write, &anonymous); r.Outcome != mcp.OutcomeApprovalRequired || askedEmpty.Load() {
		t.Fatalf("an empty approver: %s %v (asked: %v)", r.Outcome, r.Err, askedEmpty.Load())
	}
	dave := "dave"
	allowed.Store(&dave)
	wantOutcome(t, h.run(t, write, &byDave), mcp.OutcomeSuccess)
	h.records(t)
}
