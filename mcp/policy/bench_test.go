package policy_test

import (
	"fmt"
	"testing"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// hundredRules is 100 rules across the layers, most of which do not match the benchmark's
// call, as in a policy shared by many agents and tenants; ten have conditions.
func hundredRules() []policy.Rule {
	var rules []policy.Rule
	for i := range 100 {
		r := policy.Rule{ID: fmt.Sprintf("r%d", i)}
		switch i % 5 {
		case 0:
			r.Layer, r.Tenants, r.Tools = "tenant", []string{fmt.Sprintf("tenant-%d", i)}, []string{"mail__*"}
		case 1:
			r.Layer, r.Paths = "resource", []string{fmt.Sprintf("secret-%d", i)}
		case 2:
			r.Layer, r.Tools, r.When = "ask", []string{fmt.Sprintf("svc%d__*", i)}, "args.amount > 100"
		case 3:
			r.Layer, r.Principals, r.Tools = "allow", []string{fmt.Sprintf("key:user-%d", i)}, []string{"fs__*"}
		case 4:
			r.Layer, r.Skills, r.Paths = "allow", []string{fmt.Sprintf("skill-%d", i)}, []string{"exports"}
		}
		rules = append(rules, r)
	}
	rules[99] = policy.Rule{ID: "r99", Layer: "allow", Tools: []string{"fs__write"}, Paths: []string{"exports"}, When: "args.size < 1000"}
	return rules
}

// BenchmarkDecide: one decision at 100 rules, resources already extracted (the pipeline
// extracts them once per call; BenchmarkExtract measures that).
func BenchmarkDecide(b *testing.B) {
	p, err := policy.New(hundredRules(), nil)
	if err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"path": "./exports/../exports/a.csv", "size": 10.0}
	c := call(b, "key:alice", "acme", "export", "fs__write", args)
	if d := p.Decide(c); d.Verdict != policy.Allow || d.Rule != "r99" {
		b.Fatalf("decision %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Decide(c)
	}
}

// BenchmarkExtract: taking and canonicalising one path resource.
func BenchmarkExtract(b *testing.B) {
	specs := []policy.ResourceSpec{{Pointer: "/path", Kind: policy.KindPath, Root: "/srv"}}
	args := map[string]any{"path": "./exports/../exports/a.csv"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Extract(specs, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideConditions: 20 conditions that are evaluated and fail, as in
// BenchmarkPolicyOverhead's rules.
func BenchmarkDecideConditions(b *testing.B) {
	var rules []policy.Rule
	for i := range 20 {
		rules = append(rules, policy.Rule{ID: fmt.Sprintf("c%d", i), Layer: "ask", Tools: []string{"mem__*"}, When: fmt.Sprintf("args.text == 'x%d'", i)})
	}
	p, err := policy.New(rules, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := &policy.Call{Tool: "mem__echo", Contracted: true, Effect: "read", Risk: "low", Args: map[string]any{"text": "hello"}}
	b.ReportAllocs()
	for b.Loop() {
		p.Decide(c)
	}
}
