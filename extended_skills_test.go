package handoff

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExtendedCardSkillsValidated: a skill of the extended card is held to
// the same rules as a public one: a section it lacks or should not have is
// a config error naming its key, and New builds what it needs (its tool's
// MCP server, its delegation contract) or refuses, where before New ignored
// it and the first task for it panicked.
func TestExtendedCardSkillsValidated(t *testing.T) {
	for _, tc := range []struct{ name, skill, want string }{
		{"delegate without its section", "{id: x, name: X, executor: delegate}", "extended_card.skills[0].delegate"},
		{"mcp without its tool", "{id: x, name: X, executor: mcp}", "extended_card.skills[0].tool"},
		{"tool on a tck skill", "{id: x, name: X, executor: tck, tool: a__b}", "extended_card.skills[0].tool"},
		{"id used by a public skill", "{id: s, name: X, executor: tck}", "extended_card.skills[0].id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+"extended_card:\n  skills: ["+tc.skill+"]\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}

	t.Run("mcp skill without mcp_servers", func(t *testing.T) {
		c := testConfig(t)
		c.ExtendedCard = &ExtendedCardConfig{Skills: []SkillConfig{{ID: "x", Name: "X", Executor: "mcp", Tool: "notes__stats"}}}
		if _, err := New(t.Context(), c); err == nil || !strings.Contains(err.Error(), "skill x uses an MCP tool but mcp_servers is empty") {
			t.Fatalf("New = %v, want the refusal naming skill x", err)
		}
	})
	t.Run("delegate skill's contract is loaded", func(t *testing.T) {
		contract, err := filepath.Abs("examples/delegation/contract.yaml") // a contract for count-notes
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+`peers: [{name: p, url: "http://127.0.0.1:1", trust: {jku_prefixes: ["http://127.0.0.1:1/"]}}]
extended_card:
  skills: [{id: other, name: X, executor: delegate, delegate: {skill: count, contract: "`+contract+`"}}]
log: {level: error}
`))
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = t.TempDir()
		if _, err := New(t.Context(), c); err == nil || !strings.Contains(err.Error(), `is for skill "count-notes"`) {
			t.Fatalf("New = %v, want the contract refused: it is for another skill", err)
		}
	})
}
