package handoff

import (
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/internal/tck"
)

// SkillMetadataKey is the message metadata key a client may set to the id of
// the skill it wants; without it the agent's first skill answers.
const SkillMetadataKey = skill.MetadataKey

// The defaults of a delegate skill's config (see [DelegateConfig]).
const (
	defaultDelegationTimeout = 5 * time.Minute
	defaultReverify          = 2
	defaultBlobThreshold     = 64 << 10
)

// newSkillRouter builds the engine's executor: each of the config's skills
// with the executor it names, inside its output gate when it has one. t is
// nil without MCP servers, d without delegate skills, m without model
// skills and output gates; goExecs are the program's own (WithExecutor).
func newSkillRouter(c *Config, t *tools, d *delegating, m *modelSkills, goExecs map[string]a2asrv.AgentExecutor) *skill.Router {
	var out *skill.Outbound
	if d != nil {
		out = d.out
	}
	delegates := map[string]skill.DelegateSpec{}
	for _, s := range allSkills(c) {
		if s.Executor == "delegate" {
			delegates[s.ID] = delegateSpec(s.Delegate)
		}
	}
	r := skill.NewRouter()
	for _, s := range allSkills(c) {
		var x a2asrv.AgentExecutor
		switch s.Executor {
		case "tck":
			x = tck.New()
		case "mcp":
			x = m.output(s.ID, skill.NewTool(s.ID, s.Tool, *t.governed()), out)
		case "delegate":
			x = m.output(s.ID, skill.NewDelegate(s.ID, delegates[s.ID], out), out)
		case "go":
			x = m.output(s.ID, skill.NewProgram(s.ID, goExecs[s.ID], t.governed(), out, delegates), out)
		case "model":
			x = skill.NewModel(s.ID, m.specs[s.ID], t.governed(), out, delegates)
		}
		r.Add(s.ID, x)
	}
	return r
}

// delegateSpec is a delegate skill's config with its defaults applied. An
// extended card's skill may have no delegate section (validate checks only
// the public card's skills): it gets the defaults and no peer skill.
func delegateSpec(cfg *DelegateConfig) skill.DelegateSpec {
	spec := skill.DelegateSpec{Timeout: defaultDelegationTimeout, Reverify: defaultReverify, BlobThreshold: defaultBlobThreshold}
	if cfg == nil {
		return spec
	}
	spec.Skill, spec.Tags, spec.Scopes = cfg.Skill, cfg.Tags, cfg.Scopes
	if cfg.Timeout != nil {
		spec.Timeout = cfg.Timeout.Duration
	}
	if cfg.Reverify != nil {
		spec.Reverify = *cfg.Reverify
	}
	if cfg.BlobThreshold != nil {
		spec.BlobThreshold = *cfg.BlobThreshold
	}
	return spec
}
