package policy_test

import (
	"slices"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// tableRules is the rule set the decision table runs against: one or more rules per layer.
var tableRules = []policy.Rule{
	{ID: "no-shell", Layer: "immutable", Tools: []string{"shell__*"}},
	{ID: "no-late-calc", Layer: "immutable", Tools: []string{"calc__[x-z]*"}},
	{ID: "acme-no-mail", Layer: "tenant", Tenants: []string{"acme"}, Tools: []string{"mail__send"}},
	{ID: "acme-big-payments", Layer: "tenant", Tenants: []string{"acme"}, Tools: []string{"pay__charge"}, When: "args.amount > 1000"},
	{ID: "payments-files", Layer: "resource", Paths: []string{"payments"}},
	{ID: "no-internal-urls", Layer: "resource", URLs: []string{"https://internal.example.com/"}},
	{ID: "frozen-account", Layer: "resource", IDs: []string{"acct-13"}},
	{ID: "ask-prod-deploy", Layer: "ask", Tools: []string{"deploy__*"}, When: "args.env == 'prod'"},
	{ID: "ask-bob", Layer: "ask", Principals: []string{"key:bob"}, Effects: []string{"write"}},
	{ID: "exports-skill", Layer: "allow", Skills: []string{"export"}, Tools: []string{"fs__write"}, Paths: []string{"exports"}},
	{ID: "alice-deploys", Layer: "allow", Principals: []string{"key:alice"}, Tools: []string{"deploy__*"}},
	{ID: "acme-fetch", Layer: "allow", Tenants: []string{"acme"}, Tools: []string{"web__fetch"}, URLs: []string{"https://example.com/"}},
	{ID: "ask-fetch-uploads", Layer: "allow", Decision: "ask", Tools: []string{"web__fetch"}, URLs: []string{"https://example.com/upload"}},
	{ID: "bad-condition-allow", Layer: "allow", Tools: []string{"calc__*"}, When: "args.n / 0 == 1"},
	{ID: "bad-condition-deny", Layer: "tenant", Tools: []string{"calc__risky"}, When: "args.missing.deeper == 1"},
	{ID: "risk-high-read-ask", Layer: "ask", Effects: []string{"read"}, Risks: []string{"high"}, Tools: []string{"db__*"}},
}

var contracts = map[string]struct {
	effect, risk string
	mandatory    bool
	specs        []policy.ResourceSpec
}{
	"fs__write":    {"write", "low", false, []policy.ResourceSpec{{Pointer: "/path", Kind: policy.KindPath, Root: "/srv"}}},
	"fs__read":     {"read", "low", false, []policy.ResourceSpec{{Pointer: "/path", Kind: policy.KindPath, Root: "/srv"}}},
	"fs__delete":   {"destructive", "high", false, []policy.ResourceSpec{{Pointer: "/paths", Kind: policy.KindPath}}},
	"web__fetch":   {"read", "low", false, []policy.ResourceSpec{{Pointer: "/url", Kind: policy.KindURL}}},
	"mail__send":   {"external_send", "high", false, nil},
	"mail__draft":  {"write", "low", true, nil},
	"pay__charge":  {"external_send", "low", false, []policy.ResourceSpec{{Pointer: "/account", Kind: policy.KindID}}},
	"deploy__run":  {"write", "low", false, nil},
	"shell__exec":  {"write", "low", false, nil},
	"notes__write": {"write", "low", false, nil},
	"notes__list":  {"read", "low", false, nil},
	"calc__sum":    {"read", "low", false, nil},
	"calc__zap":    {"read", "low", false, nil},
	"calc__risky":  {"read", "low", false, nil},
	"db__query":    {"read", "high", false, nil},
	"db__drop":     {"destructive", "high", false, nil},
}

// call builds the Call the pipeline would: contract classification, canonical resources.
func call(t testing.TB, principal, tenant, skill, tool string, args map[string]any) *policy.Call {
	t.Helper()
	c := &policy.Call{Principal: principal, Tenant: tenant, Skill: skill, Tool: tool, TaskID: "task-1", Args: args,
		Effect: "write", Risk: "high", Mandatory: true}
	if ct, ok := contracts[tool]; ok {
		c.Contracted, c.Effect, c.Risk, c.Mandatory = true, ct.effect, ct.risk, ct.mandatory
		c.Resources, c.ResourceErr = policy.Extract(ct.specs, args)
	}
	return c
}

func TestDecideTable(t *testing.T) {
	p, err := policy.New(tableRules, nil)
	if err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	past := time.Now().Add(-time.Hour)
	type args = map[string]any
	for _, tc := range []struct {
		name                           string
		principal, tenant, skill, tool string
		args                           args
		grants                         []policy.Grant
		want                           policy.Verdict
		rule                           string
		layer                          policy.Layer
		alsoMatched                    []string
	}{
		// immutable
		{"immutable deny beats everything", "key:alice", "acme", "export", "shell__exec", nil, nil, policy.Deny, "no-shell", policy.LayerImmutable, nil},
		{"immutable deny beats a grant", "key:carol", "", "", "shell__exec", nil,
			[]policy.Grant{{ID: "g1", Scope: policy.ScopeTask, Principal: "key:carol", TaskID: "task-1", Tool: "shell__*"}}, policy.Deny, "no-shell", policy.LayerImmutable, []string{"grant:g1", "builtin:contract-approval-none"}},
		{"tool globs are path.Match's: a class", "key:alice", "", "", "calc__zap", nil, nil, policy.Deny, "no-late-calc", policy.LayerImmutable, nil},
		// tenant
		{"tenant deny beats a principal allow", "key:alice", "acme", "", "mail__send", nil, nil, policy.Deny, "acme-no-mail", policy.LayerTenant, nil},
		{"tenant deny is the tenant's only", "key:alice", "globex", "", "mail__send", nil, nil, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"tenant deny needs a tenant", "key:alice", "", "", "mail__send", nil, nil, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"tenant condition true denies", "key:alice", "acme", "", "pay__charge", args{"amount": 5000.0, "account": "acct-1"}, nil, policy.Deny, "acme-big-payments", policy.LayerTenant, nil},
		{"tenant condition false: default ask", "key:alice", "acme", "", "pay__charge", args{"amount": 50.0, "account": "acct-1"}, nil, policy.Allow, policy.RuleContractAllow, policy.LayerAllow, nil},
		{"tenant condition compares int and double", "key:alice", "acme", "", "pay__charge", args{"amount": 1000.5, "account": "acct-1"}, nil, policy.Deny, "acme-big-payments", policy.LayerTenant, nil},
		{"failing deny condition denies", "key:alice", "", "", "calc__risky", args{}, nil, policy.Deny, "bad-condition-deny", policy.LayerTenant, nil},
		{"failing allow condition does not allow, contract does", "key:alice", "", "", "calc__sum", args{"n": 1.0}, nil, policy.Allow, policy.RuleContractAllow, policy.LayerAllow, nil},
		// resource
		{"resource deny beats a skill allow through ..", "key:alice", "", "export", "fs__write", args{"path": "./exports/../payments/x"}, nil, policy.Deny, "payments-files", policy.LayerResource, []string{"builtin:contract-approval-none"}},
		{"resource deny on the prefix itself", "key:alice", "", "", "fs__read", args{"path": "payments"}, nil, policy.Deny, "payments-files", policy.LayerResource, nil},
		{"resource deny under an absolute root", "key:alice", "", "", "fs__read", args{"path": "/srv/payments/2026/q1.csv"}, nil, policy.Deny, "payments-files", policy.LayerResource, nil},
		{"a sibling with the prefix's name is not under it", "key:alice", "", "", "fs__read", args{"path": "payments-old/x"}, nil, policy.Allow, policy.RuleContractAllow, policy.LayerAllow, nil},
		{"a path leaving its root is denied", "key:alice", "", "export", "fs__write", args{"path": "exports/../../etc/passwd"}, nil, policy.Deny, policy.RuleBadResource, policy.LayerResource, nil},
		{"an absolute path outside the root is denied", "key:alice", "", "", "fs__read", args{"path": "/etc/passwd"}, nil, policy.Deny, policy.RuleBadResource, policy.LayerResource, nil},
		{"a non-string resource is denied", "key:alice", "", "", "fs__read", args{"path": 7.0}, nil, policy.Deny, policy.RuleBadResource, policy.LayerResource, nil},
		{"any path of a list under a deny denies", "key:alice", "", "", "fs__delete", args{"paths": []any{"tmp/a", "payments/b"}}, nil, policy.Deny, "payments-files", policy.LayerResource, nil},
		{"url deny after canonicalisation", "key:alice", "acme", "", "web__fetch", args{"url": "HTTPS://Internal.Example.COM:443/admin"}, nil, policy.Deny, "no-internal-urls", policy.LayerResource, nil},
		{"url dot segments resolved before the deny", "key:alice", "acme", "", "web__fetch", args{"url": "https://example.com/../../x"}, nil, policy.Allow, "acme-fetch", policy.LayerAllow, nil},
		{"id deny exact", "key:alice", "", "", "pay__charge", args{"account": "acct-13", "amount": 1.0}, nil, policy.Deny, "frozen-account", policy.LayerResource, nil},
		{"id deny is exact, not a prefix", "key:alice", "", "", "pay__charge", args{"account": "acct-130", "amount": 1.0}, nil, policy.Allow, policy.RuleContractAllow, policy.LayerAllow, nil},
		{"grant does not beat a resource deny", "key:carol", "", "", "fs__write", args{"path": "payments/x"},
			[]policy.Grant{{ID: "g2", Scope: policy.ScopeResource, Principal: "key:carol", Tool: "fs__write", Resource: "payments", Expires: future}}, policy.Deny, "payments-files", policy.LayerResource, []string{"grant:g2"}},
		// mandatory ask
		{"mandatory ask beats an allow", "key:alice", "", "", "deploy__run", args{"env": "prod"}, nil, policy.Ask, "ask-prod-deploy", policy.LayerAsk, []string{"alice-deploys"}},
		{"mandatory ask condition false: allow", "key:alice", "", "", "deploy__run", args{"env": "dev"}, nil, policy.Allow, "alice-deploys", policy.LayerAllow, []string{"builtin:contract-approval-none"}},
		{"contract approval mandatory asks", "key:alice", "", "", "mail__draft", nil, nil, policy.Ask, policy.RuleContractAsk, policy.LayerAsk, nil},
		{"a task grant does not answer a mandatory ask", "key:alice", "", "", "mail__draft", nil,
			[]policy.Grant{{ID: "g3", Scope: policy.ScopeTask, Principal: "key:alice", TaskID: "task-1", Tool: "mail__*"}}, policy.Ask, policy.RuleContractAsk, policy.LayerAsk, []string{"grant:g3"}},
		{"ask by principal and effect", "key:bob", "", "", "notes__write", nil, nil, policy.Ask, "ask-bob", policy.LayerAsk, nil},
		{"ask by principal spares reads", "key:bob", "", "", "notes__list", nil, nil, policy.Allow, policy.RuleContractAllow, policy.LayerAllow, nil},
		{"ask on high-risk reads", "key:alice", "", "", "db__query", nil, nil, policy.Ask, "risk-high-read-ask", policy.LayerAsk, nil},
		// grants
		{"task grant answers a default ask", "key:carol", "", "", "db__drop", nil,
			[]policy.Grant{{ID: "g4", Scope: policy.ScopeTask, Principal: "key:carol", TaskID: "task-1", Tool: "db__drop"}}, policy.Allow, "grant:g4", policy.LayerGrant, nil},
		{"task grant is for its task only", "key:carol", "", "", "db__drop", nil,
			[]policy.Grant{{ID: "g5", Scope: policy.ScopeTask, Principal: "key:carol", TaskID: "task-2", Tool: "db__drop"}}, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"grant is for its principal only", "key:dave", "", "", "db__drop", nil,
			[]policy.Grant{{ID: "g6", Scope: policy.ScopeTask, Principal: "key:carol", TaskID: "task-1", Tool: "db__drop"}}, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"scope grant covers its prefix", "key:carol", "", "", "fs__delete", args{"paths": []any{"tmp/a", "./tmp/b/../c"}},
			[]policy.Grant{{ID: "g7", Scope: policy.ScopeResource, Principal: "key:carol", Tool: "fs__delete", Resource: "tmp", Expires: future}}, policy.Allow, "grant:g7", policy.LayerGrant, nil},
		{"scope grant needs every resource under it", "key:carol", "", "", "fs__delete", args{"paths": []any{"tmp/a", "home/b"}},
			[]policy.Grant{{ID: "g8", Scope: policy.ScopeResource, Principal: "key:carol", Tool: "fs__delete", Resource: "tmp", Expires: future}}, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"expired scope grant", "key:carol", "", "", "fs__delete", args{"paths": []any{"tmp/a"}},
			[]policy.Grant{{ID: "g9", Scope: policy.ScopeResource, Principal: "key:carol", Tool: "fs__delete", Resource: "tmp", Expires: past}}, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"grant answers an allow-layer ask", "key:carol", "acme", "", "web__fetch", args{"url": "https://example.com/upload/1"},
			[]policy.Grant{{ID: "g10", Scope: policy.ScopeTask, Principal: "key:carol", TaskID: "task-1", Tool: "web__*"}}, policy.Allow, "grant:g10", policy.LayerGrant, []string{"acme-fetch", "ask-fetch-uploads"}},
		// allow
		{"skill allow on its prefix", "key:carol", "", "export", "fs__write", args{"path": "exports/2026/a.csv"}, nil, policy.Allow, "exports-skill", policy.LayerAllow, nil},
		{"skill allow needs the skill", "key:carol", "", "other", "fs__write", args{"path": "exports/a.csv"}, nil, policy.Allow, policy.RuleContractAllow, policy.LayerAllow, nil},
		{"an ask in the allow layer beats its allow", "key:carol", "acme", "", "web__fetch", args{"url": "https://EXAMPLE.com:443/upload"}, nil, policy.Ask, "ask-fetch-uploads", policy.LayerAllow, []string{"acme-fetch"}},
		{"tenant allow on a canonical url", "key:carol", "acme", "", "web__fetch", args{"url": "HTTPS://Example.COM:443/a"}, nil, policy.Allow, "acme-fetch", policy.LayerAllow, nil},
		// default
		{"no contract: default deny", "key:alice", "acme", "", "unknown__tool", nil, nil, policy.Deny, policy.RuleNoContract, policy.LayerDefault, nil},
		{"no contract: a grant does not open it", "key:carol", "", "", "unknown__tool", nil,
			[]policy.Grant{{ID: "g11", Scope: policy.ScopeTask, Principal: "key:carol", TaskID: "task-1", Tool: "unknown__tool"}}, policy.Deny, policy.RuleNoContract, policy.LayerDefault, nil},
		{"high-risk destructive without approval: default ask", "key:alice", "", "", "db__drop", nil, nil, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
		{"high-risk external send: default ask", "key:alice", "globex", "", "mail__send", nil, nil, policy.Ask, policy.RuleDefaultAsk, policy.LayerDefault, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call(t, tc.principal, tc.tenant, tc.skill, tc.tool, tc.args)
			c.Grants = tc.grants
			d := p.Decide(c)
			if d.Verdict != tc.want || d.Rule != tc.rule || d.Layer != tc.layer {
				t.Fatalf("got %s by %s (%s), want %s by %s (%s); matched %+v; reason %q", d.Verdict, d.Rule, d.Layer, tc.want, tc.rule, tc.layer, d.Matched, d.Reason)
			}
			if d.Version != p.Version() || d.Version == "" {
				t.Errorf("version %q, policy's %q", d.Version, p.Version())
			}
			if len(d.Matched) == 0 || d.Matched[0].Rule != d.Rule {
				t.Errorf("matched %+v does not start with the deciding rule", d.Matched)
			}
			for _, r := range tc.alsoMatched {
				if !slices.ContainsFunc(d.Matched, func(m policy.Match) bool { return m.Rule == r }) {
					t.Errorf("%s not among matched %+v", r, d.Matched)
				}
			}
			if d.Verdict != policy.Allow && d.Reason == "" {
				t.Errorf("no reason for %s", d.Verdict)
			}
		})
	}
}
