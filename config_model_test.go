package handoff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// modelConfig is an agent with one model and one model skill; line 9 is
// the models entry, line 17 the skill's model section.
const modelConfig = `name: A
description: B
auth: {anonymous: true}
skills:
  - id: notes
    name: Notes
    executor: model
    model:
      use: local
      instructions: Keep notes.
      tools: ["notes__*"]
models:
  - name: local
    base_url: http://127.0.0.1:11434/v1
    model: qwen2.5
    timeout: 30s
`

func TestParseModelConfig(t *testing.T) {
	c, err := ParseConfig("agent.yaml", strings.NewReader(modelConfig))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Models[0].endpoint()
	if e.Name != "local" || e.Timeout != 30*time.Second || c.Skills[0].Model.Use != "local" || c.Skills[0].Model.Tools[0] != "notes__*" {
		t.Fatalf("decoded %+v, %+v", e, c.Skills[0].Model)
	}
}

func TestParseModelConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown model key", strings.Replace(modelConfig, "      tools:", "      temperature: 2\n      tools:", 1),
			[]string{"agent.yaml:11: skills[0].model.temperature: is not a known key"}},
		{"unknown endpoint key", modelConfig + "    api_key: sk-secret\n", []string{"agent.yaml:17: models[0].api_key: is not a known key"}},
		{"unknown model", strings.Replace(modelConfig, "use: local", "use: remote", 1), []string{"agent.yaml:9: skills[0].model.use:", `"remote"`}},
		{"bad timeout", strings.Replace(modelConfig, "timeout: 30s", "timeout: soon", 1), []string{"agent.yaml:16: models[0].timeout:", "not a duration"}},
		{"bad base url", strings.Replace(modelConfig, "http://127.0.0.1:11434/v1", "localhost", 1), []string{"agent.yaml:14: models[0].base_url:"}},
		{"bad key variable", modelConfig + "    api_key_env: \"not a name\"\n", []string{"agent.yaml:17: models[0].api_key_env:"}},
		{"too many retries", modelConfig + "    max_retries: 99\n", []string{"agent.yaml:17: models[0].max_retries:"}},
		{"duplicate model", modelConfig + "  - {name: local, base_url: \"http://x/v1\", model: m}\n", []string{"agent.yaml:17: models[1].name:", "another model"}},
		{"no instructions", strings.Replace(modelConfig, "      instructions: Keep notes.\n", "", 1), []string{"agent.yaml:8: skills[0].model.instructions: is required"}},
		{"bad glob", strings.Replace(modelConfig, `"notes__*"`, `"notes__["`, 1), []string{"agent.yaml:11: skills[0].model.tools[0]:"}},
		{"no model section", strings.Replace(modelConfig, "    model:\n      use: local\n      instructions: Keep notes.\n      tools: [\"notes__*\"]\n", "", 1),
			[]string{"agent.yaml:5: skills[0].model:", "has a model section"}},
		{"model section on a tck skill", strings.Replace(modelConfig, "executor: model", "executor: tck", 1), []string{"agent.yaml:8: skills[0].model:"}},
		{"delegate not a skill", strings.Replace(modelConfig, "      tools:", "      delegates: [refund]\n      tools:", 1),
			[]string{"agent.yaml:11: skills[0].model.delegates[0]:", `"refund" is not a delegate skill`}},
		{"missing instructions file", strings.Replace(modelConfig, "instructions: Keep notes.", "instructions_file: nope.md", 1),
			[]string{"agent.yaml:10: skills[0].model.instructions_file:", "nope.md is not a readable file"}},
		{"output on a tck skill", strings.Replace(modelConfig, "    executor: model\n    model:\n      use: local\n      instructions: Keep notes.\n      tools: [\"notes__*\"]\n",
			"    executor: tck\n    output: {schema: {type: object}}\n", 1), []string{"agent.yaml:8: skills[0].output:", "a tck skill has no output gate"}},
		{"output schema that does not resolve", strings.Replace(modelConfig, "    executor: model\n    model:\n      use: local\n      instructions: Keep notes.\n      tools: [\"notes__*\"]\n",
			"    executor: go\n    output: {schema: {type: object, properties: {n: {$ref: \"#/nowhere\"}}}}\n", 1), []string{"agent.yaml:8: skills[0].output.schema: output schema:"}},
		{"output without schema", strings.Replace(modelConfig, "    executor: model\n", "    executor: model\n    output: {contract: c.yaml}\n", 1),
			[]string{"skills[0].output.schema: is required", "agent.yaml:8: skills[0].output.contract:", "c.yaml is not a readable file"}},
		{"approval_when without output", strings.Replace(modelConfig, "    executor: model\n", "    executor: model\n    approval_when: result.n > 1\n", 1),
			[]string{"agent.yaml:8: skills[0].approval_when: needs output"}},
		{"approval_when not CEL", strings.Replace(modelConfig, "    executor: model\n", "    executor: model\n    approval_when: \"result.n >\"\n    output: {schema: {type: object}}\n", 1),
			[]string{"agent.yaml:8: skills[0].approval_when: CEL:"}},
		{"missing skills dir", strings.Replace(modelConfig, "      tools:", "      skills_dir: skills/\n      tools:", 1),
			[]string{"agent.yaml:11: skills[0].model.skills_dir:", "is not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.yaml", strings.NewReader(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestOutputOnEverySkillKind: go, mcp and delegate skills take output and
// approval_when as model skills do.
func TestOutputOnEverySkillKind(t *testing.T) {
	dir := t.TempDir()
	contract := writeContract(t, dir, "d", "/notes", "true")
	c, err := ParseConfig("agent.yaml", strings.NewReader(`name: A
description: B
auth: {anonymous: true}
peers: [{name: p, url: "http://127.0.0.1:1", trust: {jku_prefixes: ["http://127.0.0.1:1/"]}}]
skills:
  - {id: g, name: G, executor: go, output: {schema: {type: object}}, approval_when: result.n > 1}
  - {id: m, name: M, executor: mcp, tool: notes__stats, output: {schema: {type: object}, contract: `+contract+`}}
  - {id: d, name: D, executor: delegate, delegate: {skill: s, contract: `+contract+`}, output: {schema: {type: object}, contract: `+contract+`}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Skills {
		if s.Output == nil || s.Output.Schema["type"] != "object" {
			t.Errorf("skill %s: output %+v", s.ID, s.Output)
		}
	}
}

// TestModelConfigFilesRelative: instructions_file and skills_dir are found
// beside the config file, wherever the agent was started from.
func TestModelConfigFilesRelative(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("Keep notes."), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "skills"), 0o700); err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(modelConfig, "instructions: Keep notes.", "instructions_file: prompt.md\n      skills_dir: skills", 1)
	file := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.relative(c.Skills[0].Model.InstructionsFile); got != filepath.Join(dir, "prompt.md") {
		t.Fatalf("instructions_file resolves to %s", got)
	}
}
