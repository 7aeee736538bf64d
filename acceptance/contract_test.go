package acceptance_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/acceptance"
)

func TestLoadContract(t *testing.T) {
	c, err := acceptance.LoadContract(filepath.Join("testdata", "refund.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Skill != "refund" || c.Version != "2026-11-01" {
		t.Errorf("contract %s %s", c.Skill, c.Version)
	}
}

// Each bad contract must fail with every problem, each naming the file, its line, the field
// and the reason.
func TestLoadContractBad(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"unknown_field.yaml", []string{"unknown_field.yaml:5: commit_require: unknown field"}},
		{"bad_pointer.yaml", []string{`bad_pointer.yaml:7: commit_requires[0].pointer: JSON pointer "receipt_id" must be empty or start with /`}},
		{"bad_cel.yaml", []string{"bad_cel.yaml:10: verifiers[0] (provider-confirms).condition: CEL: ERROR", "Syntax error"}},
		{"bad_schema.yaml", []string{"bad_schema.yaml:4: artifacts.receipt: not a JSON Schema", "minimum"}},
		{"several.yaml", []string{
			"several.yaml:1: skill: required",
			`several.yaml:5: freshness.artifact: "invoice" is not a declared artifact`,
			`several.yaml:7: freshness.max_age: not a duration such as 15m: "soon"`,
			`several.yaml:12: verifiers[0] (check).arguments.id.artifact: "reciept" is not a declared artifact`,
			"several.yaml:13: verifiers[0] (check).condition: CEL: must be a bool, not int",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", "bad", tt.file)
			_, err := acceptance.LoadContract(path)
			if !errors.Is(err, acceptance.ErrInvalidContract) {
				t.Fatalf("err %v, want ErrInvalidContract", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if !strings.HasPrefix(err.Error(), path) {
				t.Errorf("error does not start with the file name:\n%v", err)
			}
		})
	}
}

func TestParseContractInline(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"empty", "", "inline: empty contract"},
		{"two documents", "skill: a\nversion: '1'\nartifacts: {x: {}}\n---\nskill: b\n", "inline:4: more than one YAML document"},
		{"no artifacts", "skill: a\nversion: '1'\n", "inline:1: artifacts: at least one artifact is required"},
		{"bad tilde", "skill: a\nversion: '1'\nartifacts: {x: {}}\ncommit_requires: [{artifact: x, pointer: /a~2}]\n", "~ must be followed by 0 or 1"},
		{"external ref", "skill: a\nversion: '1'\nartifacts: {x: {$ref: 'https://example.com/s.json'}}\n", "inline:3: artifacts.x: not a JSON Schema"},
		{"zero max_age", "skill: a\nversion: '1'\nartifacts: {x: {}}\nfreshness: {artifact: x, pointer: /t, max_age: 0s}\n", "freshness.max_age: must be positive"},
		{"duplicate verifier", "skill: a\nversion: '1'\nartifacts: {x: {}}\nverifiers:\n- {name: v, tool: t, condition: 'true'}\n- {name: v, tool: t, condition: 'true'}\n", `inline:6: verifiers[1].name: duplicate verifier "v"`},
		{"verifier without tool", "skill: a\nversion: '1'\nartifacts: {x: {}}\nverifiers:\n- {name: v, condition: 'true'}\n", "verifiers[0] (v).tool: required"},
		{"literal argument not JSON", "skill: a\nversion: '1'\nartifacts: {x: {}}\nverifiers:\n- name: v\n  tool: t\n  arguments: {opts: {1: one}}\n  condition: 'true'\n", "inline:7: verifiers[0] (v).arguments.opts: not a JSON value"},
		{"wrong type", "skill: [a]\nversion: '1'\nartifacts: {x: {}}\n", "line 1: cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := acceptance.ParseContract("inline", strings.NewReader(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadContractMissingFile(t *testing.T) {
	_, err := acceptance.LoadContract(filepath.Join("testdata", "absent.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, acceptance.ErrInvalidContract) {
		t.Errorf("err %v, want fs.ErrNotExist and not ErrInvalidContract", err)
	}
}

// FuzzParseContract: no input panics the parser, and any contract it accepts can be decided.
func FuzzParseContract(f *testing.F) {
	for _, pattern := range []string{"testdata/*.yaml", "testdata/bad/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, name := range files {
			text, err := os.ReadFile(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(text))
		}
	}
	ledger := openLedger(f) // never written: no completion below can commit
	f.Fuzz(func(t *testing.T, text string) {
		c, err := acceptance.ParseContract("fuzz", strings.NewReader(text))
		if err != nil {
			if !errors.Is(err, acceptance.ErrInvalidContract) {
				t.Fatalf("error %v does not wrap ErrInvalidContract", err)
			}
			return
		}
		g, err := acceptance.NewGate([]*acceptance.Contract{c}, ledger, &tools{})
		if err != nil {
			t.Fatal(err)
		}
		// Every contract expects at least one artifact, so a completion without any is Unknown.
		d, err := g.Decide(t.Context(), c.Skill, completed())
		if err != nil || d.Outcome != acceptance.Unknown {
			t.Fatalf("Decide: %v, %v; want unknown", d.Outcome, err)
		}
	})
}
