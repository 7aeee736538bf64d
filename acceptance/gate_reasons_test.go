package acceptance_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
)

// TestDecideSchemaViolationIsNotMissing: an artifact that breaks its
// schema is reported as that, once; the checks that read it do not run
// (nor claim that its members, which are there, are missing), while the
// checks on the other artifact do.
func TestDecideSchemaViolationIsNotMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refund.yaml")
	if err := os.WriteFile(path, []byte(`skill: refund
version: "1"
artifacts:
  receipt:
    type: object
    required: [receipt_id, amount_cents, observed_at]
    properties:
      amount_cents: {type: integer}
  summary:
    type: object
    required: [title]
commit_requires:
  - {artifact: receipt, pointer: /receipt_id}
  - {artifact: summary, pointer: /title}
freshness: {artifact: receipt, pointer: /observed_at, max_age: 15m}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := acceptance.LoadContract(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := acceptance.NewGate([]*acceptance.Contract{c}, openLedger(t), &tools{})
	if err != nil {
		t.Fatal(err)
	}
	summary := &a2a.Artifact{Name: "summary", Parts: a2a.ContentParts{a2a.NewDataPart(map[string]any{"title": "refund of o-1"})}}
	d, err := g.Decide(t.Context(), "refund", completed(receipt(func(d map[string]any) { d["amount_cents"] = "1250" }), summary))
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != acceptance.Rejected {
		t.Fatalf("outcome %v, want rejected: %+v", d.Outcome, d.Reasons)
	}
	var names []string
	for _, c := range d.Reasons {
		names = append(names, c.Name)
		if strings.Contains(c.Reason, "missing") {
			t.Errorf("check %s says %q: the receipt's members are present", c.Name, c.Reason)
		}
	}
	if got, want := strings.Join(names, ", "), "artifact receipt, artifact summary, requires summary#/title"; got != want {
		t.Fatalf("checks %s, want %s: %+v", got, want, d.Reasons)
	}
	if c := d.Reasons[0]; c.Passed || !strings.Contains(c.Reason, `breaks its schema`) || !strings.Contains(c.Reason, "amount_cents") {
		t.Fatalf("schema check %+v, want it failed naming amount_cents", c)
	}
}

// TestDecideVerifierReasonNamesValues: a verifier that disagrees is named
// with the term of its condition that is false, and the values that term
// read; nothing else of the verifier's result is shown.
func TestDecideVerifierReasonNamesValues(t *testing.T) {
	for _, tt := range []struct {
		name   string
		result map[string]any
		want   string
	}{
		{"status", map[string]any{"status": "pending", "amount_cents": 1250, "api_token": "sk_live_do_not_show"},
			`the verifier disagrees: result.status == "settled" is false (result.status = "pending")`},
		{"amount", map[string]any{"status": "settled", "amount_cents": 99, "api_token": "sk_live_do_not_show"},
			`the verifier disagrees: result.amount_cents == evidence.receipt.amount_cents is false (result.amount_cents = 99, evidence.receipt.amount_cents = 1250)`},
		{"both", map[string]any{"status": strings.Repeat("x", 100), "amount_cents": 99},
			`result.status == "settled" is false (result.status = "` + strings.Repeat("x", 63) + `…); result.amount_cents`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := newGate(t, openLedger(t), &tools{result: tt.result}).Decide(t.Context(), "refund", completed(receipt(nil)))
			if err != nil {
				t.Fatal(err)
			}
			c := findCheck(t, d.Reasons, "verifier provider-confirms")
			if d.Outcome != acceptance.Rejected || c.Passed || !strings.Contains(c.Reason, tt.want) {
				t.Fatalf("%v, verifier check %q; want rejected with %q", d.Outcome, c.Reason, tt.want)
			}
			if strings.Contains(c.Reason, "sk_live") {
				t.Fatalf("reason %q shows a result field the condition does not read", c.Reason)
			}
		})
	}
}

// TestDecidePeerFailureReason: a peer's failure comes with its own words,
// quoted, bounded and with control characters escaped.
func TestDecidePeerFailureReason(t *testing.T) {
	for _, tt := range []struct{ name, message, want string }{
		{"its reason", "card declined", `the peer reported failed: "card declined"`},
		{"no reason", "", "the peer reported failed"},
		{"control characters", "\x1b[2Jdeclined\n", `the peer reported failed: "\x1b[2Jdeclined\n"`},
		{"long", strings.Repeat("y", 500), `the peer reported failed: "` + strings.Repeat("y", 200) + `…"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := newGate(t, openLedger(t), &tools{}).Decide(t.Context(), "refund",
				acceptance.Completion{DelegationID: "d-1", RemoteState: a2a.TaskStateFailed, RemoteMessage: tt.message})
			if err != nil {
				t.Fatal(err)
			}
			if d.Outcome != acceptance.Failed || len(d.Reasons) != 1 || d.Reasons[0].Reason != tt.want {
				t.Fatalf("%v %+v, want failed with %q", d.Outcome, d.Reasons, tt.want)
			}
		})
	}
}
