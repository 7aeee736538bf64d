package acceptance_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// tools is a ToolRunner that answers every call with result or err, and records the calls.
type tools struct {
	result any
	err    error

	mu    sync.Mutex
	calls []map[string]any
}

func (f *tools) RunTool(_ context.Context, tool string, args map[string]any) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, maps.Clone(args))
	return f.result, f.err
}

func settled() map[string]any {
	return map[string]any{"status": "settled", "amount_cents": 1250}
}

// receipt returns an honest receipt artifact, changed by edit.
func receipt(edit func(map[string]any)) *a2a.Artifact {
	data := map[string]any{
		"provider":     "stripe",
		"receipt_id":   "re_123",
		"amount_cents": 1250,
		"observed_at":  now.Add(-5 * time.Minute).Format(time.RFC3339),
	}
	if edit != nil {
		edit(data)
	}
	return &a2a.Artifact{ID: "a1", Name: "receipt", Parts: a2a.ContentParts{a2a.NewTextPart("a receipt"), a2a.NewDataPart(data)}}
}

func loadContracts(t testing.TB) []*acceptance.Contract {
	t.Helper()
	var out []*acceptance.Contract
	for _, name := range []string{"refund.yaml", "report.yaml"} {
		c, err := acceptance.LoadContract(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func openLedger(t testing.TB) *acceptance.BoltLedger {
	t.Helper()
	l, err := acceptance.OpenBoltLedger(filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func newGate(t testing.TB, l acceptance.Ledger, tr acceptance.ToolRunner, opts ...acceptance.Option) *acceptance.Gate {
	t.Helper()
	g, err := acceptance.NewGate(loadContracts(t), l, tr, append([]acceptance.Option{acceptance.WithClock(func() time.Time { return now })}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func completed(arts ...*a2a.Artifact) acceptance.Completion {
	return acceptance.Completion{DelegationID: "d-1", RemoteState: a2a.TaskStateCompleted, Artifacts: arts}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name       string
		completion acceptance.Completion
		result     any
		toolErr    error
		want       acceptance.Outcome
		failed     string // name of a check that must fail
		reason     string // in its reason
		noToolCall bool
	}{
		{
			name:       "honest",
			completion: completed(receipt(nil)),
			result:     settled(),
			want:       acceptance.Committed,
		},
		{
			name:       "lying: completed without evidence",
			completion: completed(),
			result:     settled(),
			want:       acceptance.Unknown,
			failed:     "artifact receipt",
			reason:     `no artifact "receipt"`,
			noToolCall: true,
		},
		{
			name:       "lying: receipt without a data part",
			completion: completed(&a2a.Artifact{Name: "receipt", Parts: a2a.ContentParts{a2a.NewTextPart("refunded, trust me")}}),
			want:       acceptance.Unknown,
			failed:     "artifact receipt",
			noToolCall: true,
		},
		{
			name:       "lying: empty receipt id",
			completion: completed(receipt(func(d map[string]any) { d["receipt_id"] = "" })),
			result:     settled(),
			want:       acceptance.Unknown,
			failed:     "requires receipt#/receipt_id",
			reason:     "is empty",
		},
		{
			name:       "contradicting: verifier disagrees",
			completion: completed(receipt(nil)),
			result:     map[string]any{"status": "settled", "amount_cents": 99},
			want:       acceptance.Rejected,
			failed:     "verifier provider-confirms",
			reason:     "the verifier disagrees",
		},
		{
			name:       "stale observed_at",
			completion: completed(receipt(func(d map[string]any) { d["observed_at"] = now.Add(-time.Hour).Format(time.RFC3339) })),
			result:     settled(),
			want:       acceptance.Rejected,
			failed:     "freshness receipt#/observed_at",
			reason:     "1h0m0s old, more than 15m0s",
			noToolCall: true,
		},
		{
			name:       "observed_at far in the future",
			completion: completed(receipt(func(d map[string]any) { d["observed_at"] = now.Add(time.Hour).Format(time.RFC3339) })),
			want:       acceptance.Rejected,
			failed:     "freshness receipt#/observed_at",
			reason:     "in the future",
			noToolCall: true,
		},
		{
			name:       "observed_at not a time",
			completion: completed(receipt(func(d map[string]any) { d["observed_at"] = "yesterday" })),
			want:       acceptance.Rejected,
			failed:     "freshness receipt#/observed_at",
			reason:     "not an RFC 3339 time",
			noToolCall: true,
		},
		{
			name:       "schema broken",
			completion: completed(receipt(func(d map[string]any) { d["amount_cents"] = "1250" })),
			result:     settled(),
			want:       acceptance.Rejected,
			failed:     "artifact receipt",
			reason:     "breaks its schema",
			noToolCall: true,
		},
		{
			name:       "remote failed",
			completion: acceptance.Completion{DelegationID: "d-1", RemoteState: a2a.TaskStateFailed, Artifacts: []*a2a.Artifact{receipt(nil)}},
			want:       acceptance.Failed,
			failed:     "remote",
			reason:     "the peer reported failed",
			noToolCall: true,
		},
		{
			name:       "remote rejected",
			completion: acceptance.Completion{DelegationID: "d-1", RemoteState: a2a.TaskStateRejected},
			want:       acceptance.Failed,
			noToolCall: true,
		},
		{
			name:       "remote canceled",
			completion: acceptance.Completion{DelegationID: "d-1", RemoteState: a2a.TaskStateCanceled},
			want:       acceptance.Failed,
			noToolCall: true,
		},
		{
			name:       "verifier error",
			completion: completed(receipt(nil)),
			toolErr:    errors.New("dial tcp 10.0.0.7:443: connection refused"),
			want:       acceptance.Unknown,
			failed:     "verifier provider-confirms",
			reason:     "the verifier could not answer",
		},
		{
			name:       "verifier result lacks the field the condition reads",
			completion: completed(receipt(nil)),
			result:     map[string]any{"amount_cents": 1250},
			want:       acceptance.Unknown,
			failed:     "verifier provider-confirms",
			reason:     "could not be judged",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			l := openLedger(t)
			tr := &tools{result: tt.result, err: tt.toolErr}
			d, err := newGate(t, l, tr).Decide(ctx, "refund", tt.completion)
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != tt.want {
				t.Fatalf("outcome %v, want %v; reasons %+v", d.Outcome, tt.want, d.Reasons)
			}
			if tt.failed != "" {
				c := findCheck(t, d.Reasons, tt.failed)
				if c.Passed || !strings.Contains(c.Reason, tt.reason) {
					t.Errorf("check %q = %+v, want failed with %q", tt.failed, c, tt.reason)
				}
			}
			for _, c := range d.Reasons {
				if strings.Contains(c.Reason, "10.0.0.7") {
					t.Errorf("reason %q leaks a tool error to the peer", c.Reason)
				}
			}
			if tt.noToolCall && len(tr.calls) != 0 {
				t.Errorf("verifier ran %d times, want none", len(tr.calls))
			}
			_, err = l.Get(ctx, "d-1")
			if committed := err == nil; committed != (tt.want == acceptance.Committed) {
				t.Errorf("ledger holds the delegation: %v (err %v), want %v", committed, err, tt.want == acceptance.Committed)
			}
			if tt.want != acceptance.Committed && !errors.Is(err, acceptance.ErrNotCommitted) {
				t.Errorf("Get: %v, want ErrNotCommitted", err)
			}
		})
	}
}

func findCheck(t *testing.T, checks []acceptance.Check, name string) acceptance.Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, checks)
	return acceptance.Check{}
}

func TestDecideHonestEntry(t *testing.T) {
	ctx := t.Context()
	l := openLedger(t)
	tr := &tools{result: settled()}
	d, err := newGate(t, l, tr).Decide(ctx, "refund", completed(receipt(nil)))
	if err != nil {
		t.Fatal(err)
	}
	e := d.LedgerEntry
	if d.Outcome != acceptance.Committed || e == nil || !d.Settle {
		t.Fatalf("decision %+v, want committed and settled with an entry", d)
	}
	if e.DelegationID != "d-1" || e.Skill != "refund" || e.ContractVersion != "2026-11-01" || !e.CommittedAt.Equal(now) {
		t.Errorf("entry %+v", e)
	}
	if got := e.EvidenceDigests["receipt"]; len(got) != 64 {
		t.Errorf("receipt digest %q, want hex SHA-256", got)
	}
	if len(e.Verifiers) != 1 || e.Verifiers[0].Name != "verifier provider-confirms" || !e.Verifiers[0].Passed {
		t.Errorf("verifiers %+v", e.Verifiers)
	}
	want := map[string]any{"provider": "stripe", "id": "re_123", "strict": true}
	if len(tr.calls) != 1 || !maps.Equal(tr.calls[0], want) {
		t.Errorf("tool called with %v, want %v", tr.calls, want)
	}
}

// The digest covers the data, not how a peer spelled it: the same receipt with its fields in
// another order, or its numbers as another Go type, digests the same.
func TestDecideDigestIsCanonical(t *testing.T) {
	digestOf := func(a *a2a.Artifact) string {
		d, err := newGate(t, openLedger(t), &tools{result: settled()}).Decide(t.Context(), "refund", completed(a))
		if err != nil || d.LedgerEntry == nil {
			t.Fatalf("Decide: %+v, %v", d, err)
		}
		return d.LedgerEntry.EvidenceDigests["receipt"]
	}
	a := digestOf(receipt(nil))
	b := digestOf(receipt(func(d map[string]any) { d["amount_cents"] = float64(1250) }))
	if a != b {
		t.Errorf("digests differ: %s, %s", a, b)
	}
}

func TestDecideIdempotent(t *testing.T) {
	ctx := t.Context()
	l := openLedger(t)
	clock := now
	g, err := acceptance.NewGate(loadContracts(t), l, &tools{result: settled()}, acceptance.WithClock(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	first, err := g.Decide(ctx, "refund", completed(receipt(nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	second, err := g.Decide(ctx, "refund", completed(receipt(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !second.LedgerEntry.CommittedAt.Equal(first.LedgerEntry.CommittedAt) {
		t.Errorf("second decision committed at %v, want the first entry's %v", second.LedgerEntry.CommittedAt, first.LedgerEntry.CommittedAt)
	}
	if all, err := l.List(ctx, 0); err != nil || len(all) != 1 {
		t.Errorf("ledger holds %d entries (%v), want 1", len(all), err)
	}
}

func TestDecideWithoutVerifiers(t *testing.T) {
	summary := &a2a.Artifact{Name: "summary", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"title": "Q3", "a/b": []any{"x"}})}}
	d, err := newGate(t, openLedger(t), &tools{}).Decide(t.Context(), "report", acceptance.Completion{DelegationID: "d-2", RemoteState: a2a.TaskStateCompleted, Artifacts: []*a2a.Artifact{summary}})
	if err != nil || d.Outcome != acceptance.Committed {
		t.Fatalf("Decide: %+v, %v", d, err)
	}
}

func TestDecideSettle(t *testing.T) {
	lying := completed()
	tests := []struct {
		name    string
		opts    []acceptance.Option
		attempt int
		settle  bool
	}{
		{"first attempt", nil, 0, false},
		{"below the default bound", nil, 4, false},
		{"at the default bound", nil, 5, true},
		{"bound of zero", []acceptance.Option{acceptance.WithMaxReverify(0)}, 0, true},
		{"raised bound", []acceptance.Option{acceptance.WithMaxReverify(10)}, 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := lying
			c.Attempt = tt.attempt
			d, err := newGate(t, openLedger(t), &tools{}, tt.opts...).Decide(t.Context(), "refund", c)
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != acceptance.Unknown || d.Settle != tt.settle {
				t.Errorf("decision %v settle %v, want unknown settle %v", d.Outcome, d.Settle, tt.settle)
			}
		})
	}
}

func TestDecideCannotDecide(t *testing.T) {
	ctx := t.Context()
	g := newGate(t, openLedger(t), &tools{result: settled()})
	if _, err := g.Decide(ctx, "payroll", completed(receipt(nil))); !errors.Is(err, acceptance.ErrNoContract) {
		t.Errorf("unknown skill: %v, want ErrNoContract", err)
	}
	working := completed(receipt(nil))
	working.RemoteState = a2a.TaskStateWorking
	if _, err := g.Decide(ctx, "refund", working); !errors.Is(err, acceptance.ErrNotTerminal) {
		t.Errorf("working: %v, want ErrNotTerminal", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Decide(canceled, "refund", completed(receipt(nil))); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: %v, want context.Canceled", err)
	}
}

func TestNewGateDuplicateSkill(t *testing.T) {
	cs := loadContracts(t)
	_, err := acceptance.NewGate(append(cs, cs[0]), openLedger(t), &tools{})
	if !errors.Is(err, acceptance.ErrDuplicateSkill) {
		t.Errorf("NewGate: %v, want ErrDuplicateSkill", err)
	}
}

func TestBackoff(t *testing.T) {
	for attempt, want := range map[int]time.Duration{
		0: time.Second, 1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second,
		9: 256 * time.Second, 10: 5 * time.Minute, 64: 5 * time.Minute, 1 << 40: 5 * time.Minute,
	} {
		if got := acceptance.Backoff(attempt); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", attempt, got, want)
		}
	}
}

func TestDecisionJSON(t *testing.T) {
	in := acceptance.Decision{Outcome: acceptance.Rejected, Reasons: []acceptance.Check{{Name: "remote", Reason: "x"}}}
	js, err := json.Marshal(in)
	if err != nil || !strings.Contains(string(js), `"outcome":"rejected"`) {
		t.Fatalf("Marshal: %s, %v", js, err)
	}
	var out acceptance.Decision
	if err := json.Unmarshal(js, &out); err != nil || out.Outcome != acceptance.Rejected {
		t.Errorf("Unmarshal: %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"outcome":"maybe"}`), &out); err == nil {
		t.Error("an unknown outcome was read")
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[acceptance.Outcome]string{
		acceptance.Unknown: "unknown", acceptance.Committed: "committed", acceptance.Rejected: "rejected",
		acceptance.Failed: "failed", acceptance.Outcome(9): "Outcome(9)",
	} {
		if got := o.String(); got != want {
			t.Errorf("%d: %q, want %q", int(o), got, want)
		}
	}
}

// A digest the caller's artifact store gave is what the entry records.
func TestDecideStoredDigest(t *testing.T) {
	c := completed(receipt(nil))
	c.Digests = map[string]string{"receipt": "sha256:" + strings.Repeat("ab", 32)}
	d, err := newGate(t, openLedger(t), &tools{result: settled()}).Decide(t.Context(), "refund", c)
	if err != nil || d.LedgerEntry == nil {
		t.Fatalf("Decide: %+v, %v", d, err)
	}
	if got := d.LedgerEntry.EvidenceDigests["receipt"]; got != c.Digests["receipt"] {
		t.Errorf("receipt digest %q, want the stored artifact's %q", got, c.Digests["receipt"])
	}
}
