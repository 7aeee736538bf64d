package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

func TestNewErrors(t *testing.T) {
	_, err := policy.New([]policy.Rule{
		{Layer: "allow"},
		{ID: "a", Layer: "sometimes"},
		{ID: "b", Layer: "tenant", Decision: "allow"},
		{ID: "c", Layer: "ask", Decision: "deny"},
		{ID: "d", Layer: "allow", Effects: []string{"reads"}, Risks: []string{"medium"}},
		{ID: "e", Layer: "resource", Paths: []string{"../up"}, URLs: []string{"ftp://x"}},
		{ID: "f", Layer: "allow", When: "args.x +"},
		{ID: "g", Layer: "allow", When: "'not a bool'"},
		{ID: "a", Layer: "allow"},
		{ID: "builtin:x", Layer: "allow"},
		{ID: "h", Layer: "allow", Tools: []string{""}},
	}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"rules[0].id: is required", "rules[1].layer", "rules[2].decision", "rules[3].decision",
		"rules[4].effects", "rules[4].risks", "rules[5].paths", "rules[5].urls", "rules[6].when", "rules[7].when: is string",
		`rules[8].id: "a" is also rules[1]'s`, "rules[9].id", "rules[10].tools"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	var fe *policy.FieldError
	if !errors.As(err, &fe) || fe.Index != 0 || fe.Field != "id" {
		t.Errorf("first FieldError %+v", fe)
	}
}

func TestVersion(t *testing.T) {
	a, _ := policy.New(tableRules, nil)
	b, _ := policy.New(tableRules, nil)
	c, _ := policy.New(tableRules[1:], nil)
	d, _ := policy.New(tableRules, []byte("contracts v2"))
	if a.Version() != b.Version() || a.Version() == c.Version() || a.Version() == d.Version() {
		t.Fatalf("versions %s %s %s %s", a.Version(), b.Version(), c.Version(), d.Version())
	}
}

func TestCheck(t *testing.T) {
	p, err := policy.New([]policy.Rule{
		{ID: "deny-all-mail", Layer: "tenant", Tools: []string{"mail__*"}},
		{ID: "allow-mail", Layer: "allow", Tools: []string{"mail__send"}},
		{ID: "allow-notes", Layer: "allow", Tools: []string{"notes__*"}},
		{ID: "ask-notes-write", Layer: "allow", Decision: "ask", Tools: []string{"*__write"}},
		{ID: "allow-nothing", Layer: "allow", Tools: []string{"gone__read"}},
		{ID: "allow-paths", Layer: "allow", Tools: []string{"notes__list"}, Paths: []string{"x"}},
		{ID: "fine", Layer: "resource", Tools: []string{"fs__*"}, Paths: []string{"payments"}},
		{ID: "guard-for-later", Layer: "immutable", Tools: []string{"shell__*"}},
		{ID: "deny-paths-nowhere", Layer: "resource", Tools: []string{"notes__*"}, Paths: []string{"x"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := policy.Check(p, []policy.Tool{{Name: "mail__send"}, {Name: "notes__*"}, {Name: "fs__read", Kinds: []policy.Kind{policy.KindPath}}})
	want := map[string]string{"allow-mail": "never_decides", "ask-notes-write": "conflict", "allow-nothing": "never_matches", "allow-paths": "never_matches", "deny-paths-nowhere": "never_matches"}
	for _, f := range got {
		if want[f.Rule] != f.Problem {
			t.Errorf("unexpected finding %+v", f)
		}
		delete(want, f.Rule)
	}
	for r, p := range want {
		t.Errorf("no %s finding for %s in %+v", p, r, got)
	}
}

// FuzzNew: the rule compiler never panics, and whatever it accepts compiles again from its
// JSON form to the same version and the same decisions.
func FuzzNew(f *testing.F) {
	for _, r := range tableRules {
		f.Add(r.ID, r.Layer, r.Decision, strings.Join(r.Tools, ","), strings.Join(r.Paths, ","), strings.Join(r.URLs, ","), r.When)
	}
	f.Add("x", "allow", "", "a*b*", "a/../b", "HTTPS://X.example:443", "args.n > 1.5 && principal.startsWith('key:')")
	f.Fuzz(func(t *testing.T, id, layer, decision, tools, paths, urls, when string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		r := policy.Rule{ID: id, Layer: layer, Decision: decision, Tools: split(tools), Paths: split(paths), URLs: split(urls), When: when}
		p, err := policy.New([]policy.Rule{r}, nil)
		if err != nil {
			return
		}
		js, err := json.Marshal(p.Rules())
		if err != nil {
			t.Fatal(err)
		}
		var back []policy.Rule
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		q, err := policy.New(back, nil)
		if err != nil {
			t.Fatalf("re-encoded rule refused: %v", err)
		}
		if p.Version() != q.Version() {
			t.Fatalf("version changed over a re-encode")
		}
		c := &policy.Call{Tool: "a__b", Principal: "key:x", Contracted: true, Effect: "write", Risk: "low",
			Args: map[string]any{"n": 2.0}, Resources: []policy.Resource{{Kind: policy.KindPath, Value: "b"}}}
		if a, b := p.Decide(c), q.Decide(c); a.Verdict != b.Verdict || a.Rule != b.Rule {
			t.Fatalf("decisions differ: %+v, %+v", a, b)
		}
	})
}
