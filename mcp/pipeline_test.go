package mcp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// approvers is a [mcp.WithApprovers] answer from a fixed list.
func approvers(names ...string) func(string) bool {
	return func(p string) bool { return slices.Contains(names, p) }
}

// harness is a Pipeline with its own audit file, counting Runs so that a test can check
// that every Run left exactly one record.
type harness struct {
	m     *mcp.Manager
	p     *mcp.Pipeline
	audit *mcp.BoltAudit
	path  string
	runs  int
}

func newHarness(t *testing.T, m *mcp.Manager, contracts []mcp.Contract, opts ...mcp.PipelineOption) *harness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	audit, err := mcp.OpenBoltAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = audit.Close() })
	p, err := mcp.NewPipeline(m, contracts, audit, opts...)
	if err != nil {
		t.Fatalf("NewPipeline: %v", err)
	}
	return &harness{m: m, p: p, audit: audit, path: path}
}

// run runs a proposal planned against the current snapshot unless it names one.
func (h *harness) run(t *testing.T, prop mcp.Proposal, a *mcp.Approval) mcp.PipelineResult {
	t.Helper()
	return h.runCtx(t.Context(), t, prop, a)
}

func (h *harness) runCtx(ctx context.Context, t *testing.T, prop mcp.Proposal, a *mcp.Approval) mcp.PipelineResult {
	t.Helper()
	if prop.SnapshotVersion == "" {
		prop.SnapshotVersion = h.m.Snapshot().Version
	}
	if prop.TaskID == "" {
		prop.TaskID = "task-1"
	}
	if prop.Principal == "" {
		prop.Principal = "bob"
	}
	h.runs++
	r := h.p.Run(ctx, prop, a)
	if r.AuditErr != nil || r.AuditID == "" {
		t.Fatalf("%s: not audited: %v", prop.Tool, r.AuditErr)
	}
	return r
}

// records lists the whole audit log, and checks it holds one record per Run.
func (h *harness) records(t *testing.T) []mcp.AuditRecord {
	t.Helper()
	recs, err := h.audit.List(t.Context(), mcp.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != h.runs {
		t.Fatalf("%d audit records for %d runs", len(recs), h.runs)
	}
	return recs
}

// record returns the audit record of one result.
func (h *harness) record(t *testing.T, r mcp.PipelineResult) mcp.AuditRecord {
	t.Helper()
	for _, rec := range h.records(t) {
		if rec.ID == r.AuditID {
			return rec
		}
	}
	t.Fatalf("no audit record %s", r.AuditID)
	return mcp.AuditRecord{}
}

func wantOutcome(t *testing.T, r mcp.PipelineResult, o mcp.Outcome) {
	t.Helper()
	if r.Outcome != o {
		t.Fatalf("%s: outcome %s (decision %q, err %v), want %s", r.Tool, r.Outcome, r.Decision, r.Err, o)
	}
}

// exampleManager runs the example server over stdio, its notes fresh for every test.
func exampleManager(t *testing.T) *mcp.Manager {
	t.Helper()
	m := start(t, []mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer}})
	waitReady(t, m, "ex")
	return m
}

// noteText reads a note straight through the Manager, bypassing the pipeline under test;
// "" means there is no such note.
func noteText(t *testing.T, m *mcp.Manager, name string) string {
	t.Helper()
	r := call(t, m, mcp.CallRequest{Tool: "ex__read_note", Arguments: map[string]any{"name": name}, ReadOnly: true})
	if r.Outcome == mcp.OutcomeToolError {
		return ""
	}
	want(t, r, mcp.OutcomeSuccess)
	return r.Content[0].(*mcpsdk.TextContent).Text
}

var readLow = mcp.Contract{Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}

func contract(tool string, c mcp.Contract) mcp.Contract {
	c.Tool = tool
	return c
}

// TestPipelineReadAllowed: a read, low-risk tool runs without asking and is audited with its
// result hash.
func TestPipelineReadAllowed(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{contract("ex__read_note", readLow)})
	r := h.run(t, mcp.Proposal{Tool: "ex__read_note", Principal: "carol", Arguments: map[string]any{"name": "welcome"}}, nil)
	wantOutcome(t, r, mcp.OutcomeSuccess)
	if r.Decision != mcp.DecisionAllow {
		t.Fatalf("decision %s", r.Decision)
	}
	// The digest is over RFC 8785 canonical JSON: sorted keys, no spaces.
	sum := sha256.Sum256([]byte(`{"arguments":{"name":"welcome"},"tool":"ex__read_note"}`))
	if r.Digest != hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s, want the canonical one", r.Digest)
	}
	rec := h.record(t, r)
	if rec.Outcome != mcp.OutcomeSuccess || rec.Decision != mcp.DecisionAllow || rec.ArgsDigest != r.Digest ||
		rec.Principal != "carol" || rec.TaskID != "task-1" || rec.Tool != "ex__read_note" || rec.SnapshotVersion != m.Snapshot().Version {
		t.Fatalf("record %+v", rec)
	}
	if len(rec.ResultSHA256) != 64 || rec.Approver != "" || rec.Duration <= 0 || rec.Time.IsZero() {
		t.Fatalf("record %+v", rec)
	}
	again := h.run(t, mcp.Proposal{Tool: "ex__read_note", Arguments: map[string]any{"name": "welcome"}}, nil)
	if h.record(t, again).ResultSHA256 != rec.ResultSHA256 {
		t.Fatal("the same answer hashed differently")
	}
}

// writeMandatory is the contract of ex__write_note in the approval tests: every call asks.
var writeMandatory = mcp.Contract{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskHigh, Approval: mcp.ApprovalMandatory}

// TestPipelineApproval: a tool whose contract makes approval mandatory never runs without a
// matching approval from a listed approver.
func TestPipelineApproval(t *testing.T) {
	m := exampleManager(t)
	key := bytes.Repeat([]byte("k"), 32)
	h := newHarness(t, m, []mcp.Contract{writeMandatory}, mcp.WithApprovers(approvers("alice")), mcp.WithApprovalKey(key))
	args := map[string]any{"name": "n1", "text": "hello"}
	prop := mcp.Proposal{TaskID: "t1", Tool: "ex__write_note", Arguments: args, SnapshotVersion: m.Snapshot().Version}
	notWritten := func(t *testing.T) {
		t.Helper()
		if got := noteText(t, m, "n1"); got != "" {
			t.Fatalf("the write ran: note n1 is %q", got)
		}
	}

	r := h.run(t, prop, nil)
	wantOutcome(t, r, mcp.OutcomeApprovalRequired)
	req := r.Approval
	if r.Decision != mcp.DecisionAsk || req == nil || req.Tool != prop.Tool || req.SnapshotVersion != prop.SnapshotVersion ||
		req.Digest != r.Digest || len(req.Token) != 64 || req.Reason == "" {
		t.Fatalf("decision %s, request %+v", r.Decision, req)
	}
	notWritten(t)
	approve := func(req *mcp.ApprovalRequest, who string) *mcp.Approval {
		return &mcp.Approval{Approver: who, Tool: req.Tool, SnapshotVersion: req.SnapshotVersion, Digest: req.Digest, Token: req.Token}
	}
	requestFor := func(p mcp.Proposal) *mcp.ApprovalRequest {
		t.Helper()
		r := h.run(t, p, nil)
		wantOutcome(t, r, mcp.OutcomeApprovalRequired)
		return r.Approval
	}
	otherArgs := prop
	otherArgs.Arguments = map[string]any{"name": "n1", "text": "other"}
	otherTask := prop
	otherTask.TaskID = "t2"

	for _, tc := range []struct {
		name     string
		approval *mcp.Approval
	}{
		{"unlisted approver", approve(req, "mallory")},
		{"no approver", approve(req, "")},
		{"different arguments", approve(requestFor(otherArgs), "alice")},
		{"another task's approval", approve(requestFor(otherTask), "alice")},
		{"wrong token", func() *mcp.Approval {
			a := approve(req, "alice")
			a.Token = strings.Repeat("0", 64)
			return a
		}()},
		{"forged snapshot", func() *mcp.Approval { a := approve(req, "alice"); a.SnapshotVersion = "forged"; return a }()},
		{"other tool", func() *mcp.Approval { a := approve(req, "alice"); a.Tool = "ex__read_note"; return a }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(t, prop, tc.approval)
			wantOutcome(t, r, mcp.OutcomeApprovalRequired)
			if r.Approval == nil || !strings.Contains(r.Approval.Reason, "refused") {
				t.Fatalf("request %+v, want a reason for the refusal", r.Approval)
			}
			if r.Approval.Token != req.Token {
				t.Fatal("a new request for the same call should carry the same token")
			}
			notWritten(t)
		})
	}

	t.Run("older snapshot", func(t *testing.T) {
		before := m.Snapshot().Version
		want(t, call(t, m, mcp.CallRequest{Tool: "ex__toggle_tool"}), mcp.OutcomeSuccess)
		waitFor(t, m, "a new snapshot", func() bool { return m.Snapshot().Version != before })
		now := prop
		now.SnapshotVersion = m.Snapshot().Version
		r := h.run(t, now, approve(req, "alice")) // approved against the old snapshot
		wantOutcome(t, r, mcp.OutcomeApprovalRequired)
		if !strings.Contains(r.Approval.Reason, "snapshot") {
			t.Fatalf("reason %q", r.Approval.Reason)
		}
		notWritten(t)
		prop = now // from here on, the call is planned against the current snapshot
	})

	t.Run("valid approval runs it", func(t *testing.T) {
		req := requestFor(prop)
		r := h.run(t, prop, approve(req, "alice"))
		wantOutcome(t, r, mcp.OutcomeSuccess)
		if got := noteText(t, m, "n1"); got != "hello" {
			t.Fatalf("note n1 is %q", got)
		}
		rec := h.record(t, r)
		if rec.Approver != "alice" || rec.Decision != mcp.DecisionAsk || rec.Outcome != mcp.OutcomeSuccess || rec.Principal != "bob" {
			t.Fatalf("record %+v", rec)
		}
	})

	t.Run("approval key", func(t *testing.T) {
		// The same key in another Pipeline (a restart, a replica) verifies the token; another
		// key does not.
		same := newHarness(t, m, []mcp.Contract{writeMandatory}, mcp.WithApprovers(approvers("alice")), mcp.WithApprovalKey(key))
		req := requestFor(prop)
		wantOutcome(t, same.run(t, prop, approve(req, "alice")), mcp.OutcomeSuccess)
		other := newHarness(t, m, []mcp.Contract{writeMandatory}, mcp.WithApprovers(approvers("alice")))
		wantOutcome(t, other.run(t, prop, approve(req, "alice")), mcp.OutcomeApprovalRequired)
		same.records(t)
		other.records(t)
	})

	recs := h.records(t) // one per Run, denials and refusals included
	for _, rec := range recs {
		if rec.Outcome == mcp.OutcomeApprovalRequired && (rec.Approver != "" || rec.Reason == "") {
			t.Fatalf("refused call recorded as %+v", rec)
		}
	}
}

// TestPipelineNoApprovers: by default nobody may approve, so a mandatory tool never runs.
func TestPipelineNoApprovers(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{writeMandatory})
	prop := mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "n1", "text": "x"}}
	r := h.run(t, prop, nil)
	wantOutcome(t, r, mcp.OutcomeApprovalRequired)
	if !strings.Contains(r.Approval.Reason, "no principal may approve") {
		t.Fatalf("reason %q", r.Approval.Reason)
	}
	a := &mcp.Approval{Approver: "bob", Tool: r.Approval.Tool, SnapshotVersion: r.Approval.SnapshotVersion, Digest: r.Approval.Digest, Token: r.Approval.Token}
	wantOutcome(t, h.run(t, prop, a), mcp.OutcomeApprovalRequired)
	if got := noteText(t, m, "n1"); got != "" {
		t.Fatalf("note written: %q", got)
	}
	h.records(t)
}

// TestPipelineRedaction: redacted values reach neither the approver, nor errors, nor the audit
// file, though the digest covers them.
func TestPipelineRedaction(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskHigh,
		Approval: mcp.ApprovalMandatory, Redact: []string{"text"}}}, mcp.WithApprovers(approvers("alice")))
	secrets := []string{"TOPSECRET-1", "TOPSECRET-2", "987654321", "9.87654321e+08"}

	prop := mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "diary", "text": "TOPSECRET-1"}}
	r := h.run(t, prop, nil)
	wantOutcome(t, r, mcp.OutcomeApprovalRequired)
	if got := r.Approval.Arguments; got["text"] != mcp.Redacted || got["name"] != "diary" {
		t.Fatalf("shown arguments %v", got)
	}
	other := h.run(t, mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "diary", "text": "TOPSECRET-2"}}, nil)
	if other.Digest == r.Digest {
		t.Fatal("the digest does not cover the redacted value")
	}
	a := &mcp.Approval{Approver: "alice", Tool: r.Approval.Tool, SnapshotVersion: r.Approval.SnapshotVersion, Digest: r.Approval.Digest, Token: r.Approval.Token}
	wantOutcome(t, h.run(t, prop, a), mcp.OutcomeSuccess)
	if got := noteText(t, m, "diary"); got != "TOPSECRET-1" {
		t.Fatalf("note %q", got)
	}

	// Schema errors quote the offending value: it must be scrubbed, nested or numeric.
	for _, bad := range []any{map[string]any{"inner": "TOPSECRET-2"}, []any{"TOPSECRET-2"}, 987654321} {
		r := h.run(t, mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "diary", "text": bad}}, nil)
		wantOutcome(t, r, mcp.OutcomeValidationFailed)
		for _, s := range secrets {
			if strings.Contains(r.Err.Error(), s) {
				t.Fatalf("error %q shows %s", r.Err, s)
			}
		}
	}

	h.records(t)
	if err := h.audit.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the audit file holds %s", s)
		}
	}
	if bytes.Contains(raw, []byte("diary")) { // arguments are never stored, redacted or not
		t.Error("the audit file holds the arguments")
	}
}

// TestPipelineScrubsEchoedResults: a result that echoes a redacted argument can be masked
// with the result's Scrub, in the spellings the pipeline scrubs from its reasons.
func TestPipelineScrubsEchoedResults(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskLow,
		Approval: mcp.ApprovalNone, Redact: []string{"name"}}})
	r := h.run(t, mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "SECRET-NAME-3", "text": "x"}}, nil)
	wantOutcome(t, r, mcp.OutcomeSuccess)
	text := r.Content[0].(*mcpsdk.TextContent).Text
	if text != "saved SECRET-NAME-3" || r.Scrub == nil {
		t.Fatalf("result %q, scrub set: %v", text, r.Scrub != nil)
	}
	if got := r.Scrub(text + ` and "SECRET-NAME-3"`); got != "saved "+mcp.Redacted+" and "+mcp.Redacted {
		t.Fatalf("scrubbed: %q", got)
	}
}

// TestPipelineDeny: a deny glob wins over any contract and any approval.
func TestPipelineDeny(t *testing.T) {
	m := exampleManager(t)
	allowAll := mcp.Contract{Tool: "ex__*", Effect: mcp.EffectWrite, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}
	h := newHarness(t, m, []mcp.Contract{allowAll}, mcp.WithDeny("ex__write_*"), mcp.WithApprovers(approvers("alice")))
	prop := mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": "n1", "text": "x"}}
	r := h.run(t, prop, nil)
	wantOutcome(t, r, mcp.OutcomePermissionDenied)
	if r.Decision != mcp.DecisionDeny || r.Approval != nil {
		t.Fatalf("decision %s, approval %+v", r.Decision, r.Approval)
	}
	if got := noteText(t, m, "n1"); got != "" {
		t.Fatalf("note written: %q", got)
	}
	if rec := h.record(t, r); rec.Outcome != mcp.OutcomePermissionDenied || rec.Decision != mcp.DecisionDeny || rec.Reason == "" {
		t.Fatalf("record %+v", rec)
	}
}

// TestPipelineDecisions walks the policy table on a harmless tool.
func TestPipelineDecisions(t *testing.T) {
	m := exampleManager(t)
	for _, tc := range []struct {
		name     string
		contract mcp.Contract
		want     mcp.Decision
	}{
		{"read low", readLow, mcp.DecisionAllow},
		{"read high", mcp.Contract{Effect: mcp.EffectRead, Risk: mcp.RiskHigh, Approval: mcp.ApprovalNone}, mcp.DecisionAllow},
		{"write high, approval none", mcp.Contract{Effect: mcp.EffectWrite, Risk: mcp.RiskHigh, Approval: mcp.ApprovalNone}, mcp.DecisionAllow},
		{"destructive low", mcp.Contract{Effect: mcp.EffectDestructive, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}, mcp.DecisionAllow},
		{"destructive high cannot waive approval", mcp.Contract{Effect: mcp.EffectDestructive, Risk: mcp.RiskHigh, Approval: mcp.ApprovalNone}, mcp.DecisionAsk},
		{"external_send high cannot waive approval", mcp.Contract{Effect: mcp.EffectExternalSend, Risk: mcp.RiskHigh, Approval: mcp.ApprovalNone}, mcp.DecisionAsk},
		{"read low, approval mandatory", mcp.Contract{Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalMandatory}, mcp.DecisionAsk},
		{"only a timeout: fail-closed defaults", mcp.Contract{Timeout: time.Minute}, mcp.DecisionAsk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, m, []mcp.Contract{contract("ex__list_notes", tc.contract)})
			r := h.run(t, mcp.Proposal{Tool: "ex__list_notes"}, nil)
			if r.Decision != tc.want {
				t.Fatalf("decision %s, want %s", r.Decision, tc.want)
			}
			if tc.want == mcp.DecisionAllow {
				wantOutcome(t, r, mcp.OutcomeSuccess)
			} else {
				wantOutcome(t, r, mcp.OutcomeApprovalRequired)
			}
			h.records(t)
		})
	}
}

// TestPipelineBeforeDecision: an unavailable tool or invalid arguments end the call before
// anyone is asked, and are audited all the same.
func TestPipelineBeforeDecision(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, nil, mcp.WithApprovers(approvers("alice"))) // no contracts: everything would be asked
	for _, tc := range []struct {
		name string
		prop mcp.Proposal
		want mcp.Outcome
	}{
		{"tool not in the catalog", mcp.Proposal{Tool: "ex__nope"}, mcp.OutcomeUnavailableTool},
		{"forged snapshot", mcp.Proposal{Tool: "ex__read_note", SnapshotVersion: "forged", Arguments: map[string]any{"name": "welcome"}}, mcp.OutcomeUnavailableTool},
		{"invalid arguments", mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": 5}}, mcp.OutcomeValidationFailed},
		{"arguments that are not JSON", mcp.Proposal{Tool: "ex__write_note", Arguments: map[string]any{"name": make(chan int)}}, mcp.OutcomeValidationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.run(t, tc.prop, nil)
			wantOutcome(t, r, tc.want)
			if r.Decision != "" || r.Approval != nil {
				t.Fatalf("decision %q, approval %+v: decided on a call that cannot run", r.Decision, r.Approval)
			}
			if rec := h.record(t, r); rec.Outcome != tc.want || rec.Reason == "" {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

// TestPipelineOutput: output that breaks the server's schema, or the contract's override, is
// validation_failed and is not passed on.
func TestPipelineOutput(t *testing.T) {
	m := exampleManager(t)
	h := newHarness(t, m, []mcp.Contract{contract("ex__stats", readLow)})
	wantOutcome(t, h.run(t, mcp.Proposal{Tool: "ex__stats"}, nil), mcp.OutcomeSuccess)
	r := h.run(t, mcp.Proposal{Tool: "ex__stats", Arguments: map[string]any{"break": true}}, nil)
	wantOutcome(t, r, mcp.OutcomeValidationFailed)
	if r.StructuredContent != nil {
		t.Fatalf("broken output passed on: %v", r.StructuredContent)
	}
	if rec := h.record(t, r); rec.Outcome != mcp.OutcomeValidationFailed || rec.ResultSHA256 != "" || rec.Decision != mcp.DecisionAllow {
		t.Fatalf("record %+v", rec)
	}

	override := contract("ex__stats", readLow)
	override.OutputSchema = map[string]any{"type": "object", "required": []any{"owner"}}
	o := newHarness(t, m, []mcp.Contract{override})
	wantOutcome(t, o.run(t, mcp.Proposal{Tool: "ex__stats"}, nil), mcp.OutcomeValidationFailed)
	o.records(t)
}

// TestPipelineCancel: cancelling the task's context cancels the running call, on our side and
// on the server's, and the cancelled call is still audited.
func TestPipelineCancel(t *testing.T) {
	started, sawCancel := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "wait", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "wait"}, func(ctx context.Context, _ *mcpsdk.CallToolRequest, _ struct{}) (*mcpsdk.CallToolResult, any, error) {
		started <- struct{}{}
		<-ctx.Done()
		sawCancel <- struct{}{}
		return nil, nil, ctx.Err()
	})
	m := start(t, []mcp.ServerConfig{{Name: "mem", Transport: mcp.TransportStdio, Command: "in-memory"}},
		mcp.WithTransportForTest("mem", inMemory(srv)))
	waitReady(t, m, "mem")
	h := newHarness(t, m, []mcp.Contract{{Tool: "mem__*", Effect: mcp.EffectWrite, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone, Timeout: time.Minute}})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan mcp.PipelineResult, 1)
	go func() {
		done <- h.p.Run(ctx, mcp.Proposal{TaskID: "t", Tool: "mem__wait", SnapshotVersion: m.Snapshot().Version}, nil)
	}()
	h.runs++
	waitChan(t, started, "the call to reach the server")
	cancel()
	r := <-done
	wantOutcome(t, r, mcp.OutcomeCancelled)
	waitChan(t, sawCancel, "the server to see the cancellation")
	if rec := h.record(t, r); rec.Outcome != mcp.OutcomeCancelled {
		t.Fatalf("record %+v", rec)
	}
}

func waitChan(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestContractMatching: the exact contract beats any glob, and the longest glob wins.
func TestContractMatching(t *testing.T) {
	m, err := mcp.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, m, []mcp.Contract{
		{Tool: "ex__*", Timeout: 1},
		{Tool: "ex__read_*", Timeout: 2},
		{Tool: "ex__read_note", Timeout: 3},
		{Tool: "ex__read_n*", Timeout: 4},
		{Tool: "ex__read_?ote", Timeout: 5}, // as long as ex__read_note, but a glob
	})
	for tool, want := range map[string]time.Duration{
		"ex__read_note":  3,
		"ex__read_nope":  4,
		"ex__read_other": 2,
		"ex__write_note": 1,
		"ex__read_vote":  5,
	} {
		if got := h.p.Contract(tool); got.Timeout != want || got.Tool == "" {
			t.Errorf("%s: contract %+v, want the one with timeout %d", tool, got, want)
		}
	}
	if got, want := h.p.Contract("other__x"), mcp.DefaultContract("other__x"); got.Tool != want.Tool ||
		got.Effect != mcp.EffectWrite || got.Risk != mcp.RiskHigh || got.Approval != mcp.ApprovalMandatory {
		t.Errorf("unmatched tool: %+v, want the default", got)
	}
}

// TestPipelineConfigErrors: every problem is reported at once.
func TestPipelineConfigErrors(t *testing.T) {
	m, err := mcp.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcp.NewPipeline(m, []mcp.Contract{
		{Tool: ""},
		{Tool: "a__["},
		{Tool: "a__effect", Effect: "sometimes"},
		{Tool: "a__risk", Risk: "medium"},
		{Tool: "a__approval", Approval: "maybe"},
		{Tool: "a__timeout", Timeout: -1},
		{Tool: "a__idem", Idempotency: "always"},
		{Tool: "a__schema", OutputSchema: map[string]any{"type": 7}},
		{Tool: "a__dup"},
		{Tool: "a__dup"},
	}, nil, mcp.WithApprovalKey([]byte("short")), mcp.WithDeny("["))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"no tool name", `"a__["`, "sometimes", "medium", "maybe", "negative timeout",
		`"a__idem": unknown idempotency "always"`, `"a__schema": output schema`, `"a__dup": configured twice`, "no audit log", "approval key", "bad deny pattern"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}
