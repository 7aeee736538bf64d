package model_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/model"
	"gopkg.in/yaml.v3"
)

func fields(errs []model.FieldError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func TestEndpointValidate(t *testing.T) {
	neg := -1
	for _, tc := range []struct {
		name string
		e    model.Endpoint
		want []string
	}{
		{"ok", model.Endpoint{Name: "local", BaseURL: "http://127.0.0.1:11434/v1", Model: "qwen", APIKeyEnv: "OPENAI_API_KEY", Timeout: time.Minute}, nil},
		{"empty", model.Endpoint{}, []string{"name", "base_url", "model"}},
		{"bad values", model.Endpoint{Name: "x", BaseURL: "ftp://h", Model: "m", APIKeyEnv: "not a var", Timeout: -time.Second, MaxRetries: &neg},
			[]string{"base_url", "api_key_env", "timeout", "max_retries"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fields(tc.e.Validate()); !slices.Equal(got, tc.want) {
				t.Errorf("fields %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSkillConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    model.SkillConfig
		want []string
	}{
		{"ok", model.SkillConfig{Use: "local", Instructions: "x", Tools: []string{"notes__*"}}, nil},
		{"empty", model.SkillConfig{}, []string{"use", "instructions"}},
		{"unknown model", model.SkillConfig{Use: "remote", Instructions: "x"}, []string{"use"}},
		{"both instructions", model.SkillConfig{Use: "local", Instructions: "x", InstructionsFile: "f"}, []string{"instructions_file"}},
		{"bad glob and delegate", model.SkillConfig{Use: "local", Instructions: "x", Tools: []string{"ok", "[bad"}, Delegates: []string{""}}, []string{"tools[1]", "delegates[0]"}},
		{"negative limits", model.SkillConfig{Use: "local", Instructions: "x", MaxTurns: -1, MaxToolCalls: -1, SchemaBudgetTokens: -1}, []string{"max_turns", "max_tool_calls", "schema_budget_tokens"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fields(tc.s.Validate([]string{"local"})); !slices.Equal(got, tc.want) {
				t.Errorf("fields %v, want %v", got, tc.want)
			}
		})
	}
	d := model.SkillConfig{}.WithDefaults()
	if d.MaxTurns != 8 || d.MaxToolCalls != 16 || d.SchemaBudgetTokens != 4000 {
		t.Errorf("defaults %+v", d)
	}
}

func TestConfigDecodesFromYAML(t *testing.T) {
	doc := `
models:
  - name: local
    base_url: http://127.0.0.1:11434/v1
    model: qwen2.5:7b-instruct
    api_key_env: OPENAI_API_KEY
    timeout: 60s
    max_retries: 2
model:
  use: local
  instructions: You keep the team's notes.
  tools: ["notes__*"]
  delegates: [refund]
  skills_dir: skills/
  max_turns: 8
  max_tool_calls: 16
  schema_budget_tokens: 4000
`
	var c struct {
		Models []model.Endpoint  `yaml:"models"`
		Model  model.SkillConfig `yaml:"model"`
	}
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Models[0].Timeout != time.Minute || *c.Models[0].MaxRetries != 2 || c.Model.Tools[0] != "notes__*" || c.Model.SchemaBudgetTokens != 4000 {
		t.Fatalf("decoded %+v", c)
	}
	if errs := append(c.Models[0].Validate(), c.Model.Validate([]string{"local"})...); len(errs) != 0 {
		t.Fatalf("the issue's example does not validate: %v", errs)
	}
	dec = yaml.NewDecoder(strings.NewReader("name: x\ntemperature: 1\n"))
	dec.KnownFields(true)
	var e model.Endpoint
	if err := dec.Decode(&e); err == nil || !strings.Contains(err.Error(), "temperature") {
		t.Fatalf("an unknown key decoded: %v", err)
	}
}
