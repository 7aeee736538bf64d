package policy_test

import (
	"testing"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// TestForbids: a caller is not entitled to a tool a deny rule forbids it
// whatever the arguments; rules that need the arguments (resources, a
// condition), ask and allow rules, and rules for someone else forbid
// nothing.
func TestForbids(t *testing.T) {
	p, err := policy.New(tableRules, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call policy.Call
		rule string // "" when not forbidden
	}{
		{"immutable deny", policy.Call{Principal: "alice", Tool: "shell__run"}, "no-shell"},
		{"tenant deny for the tenant", policy.Call{Principal: "alice", Tenant: "acme", Tool: "mail__send"}, "acme-no-mail"},
		{"tenant deny for another tenant", policy.Call{Principal: "alice", Tenant: "globex", Tool: "mail__send"}, ""},
		{"tenant deny with a condition", policy.Call{Principal: "alice", Tenant: "acme", Tool: "pay__charge"}, ""},
		{"resource deny needs resources", policy.Call{Principal: "alice", Tool: "fs__write"}, ""},
		{"ask rule", policy.Call{Principal: "alice", Tool: "deploy__run"}, ""},
		{"nothing matches", policy.Call{Principal: "alice", Tool: "notes__read"}, ""},
	} {
		r, ok := p.Forbids(&tc.call)
		if ok != (tc.rule != "") || r.ID != tc.rule {
			t.Errorf("%s: Forbids = %q, %v; want %q", tc.name, r.ID, ok, tc.rule)
		}
	}
}
