package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/metrics"
	"github.com/handoff-a2a/handoff/internal/model"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp"
)

// modelSkills is the agent's model side and its output gates: each model
// skill's loop spec and each other skill's output gate, by skill id, and
// the executor state their conversations and waiting results are kept in.
type modelSkills struct {
	specs map[string]skill.ModelSpec
	// outputs are the output gates of the go, mcp and delegate skills.
	outputs map[string]skill.OutputSpec
	state   executorState
}

// executorState is the executors' private task state with its Close: bbolt
// in the data directory, or Redis.
type executorState interface {
	skill.State
	Close() error
}

// newModelSkills builds every model skill's spec from the config: the
// endpoint's client (its API key read from the variable api_key_env
// names, and only there), the instructions (instructions_file read beside
// the config file), the Agent Skills of skills_dir; and the output gate of
// every other skill with an output section. nil when no skill has
// executor: model or an output gate. rdb is the task store's Redis, nil on
// the embedded store; isApprover says who may approve a result
// approval_when holds.
func newModelSkills(c *Config, rdb redis.UniversalClient, log *slog.Logger, isApprover func(string) bool, obs *metrics.Registry) (*modelSkills, error) {
	var skills []SkillConfig
	outputs := map[string]skill.OutputSpec{}
	for _, s := range allSkills(c) {
		switch {
		case s.Executor == "model" && s.Model != nil:
			skills = append(skills, s)
		case s.Output != nil:
			spec, err := outputSpec(c, s, isApprover)
			if err != nil {
				return nil, err
			}
			outputs[s.ID] = spec
		}
	}
	if len(skills) == 0 && len(outputs) == 0 {
		return nil, nil
	}
	clients := map[string]model.Completer{}
	bounds := map[string]time.Duration{}
	for i, m := range c.Models {
		e := m.endpoint()
		var key model.Secret
		if e.APIKeyEnv != "" {
			v, ok := os.LookupEnv(e.APIKeyEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("%s: models[%d].api_key_env: the variable %s is not set", c.path, i, e.APIKeyEnv)
			}
			key = model.Secret(v)
		}
		clients[e.Name] = model.NewClient(e, key, nil)
		if obs != nil {
			clients[e.Name] = observedModel{clients[e.Name], e.Name, obs}
		}
		bounds[e.Name] = turnBound(e)
	}
	descriptions := map[string]string{}
	for _, s := range allSkills(c) {
		if s.Executor == "delegate" {
			descriptions[s.ID] = s.Description
		}
	}
	ms := &modelSkills{specs: map[string]skill.ModelSpec{}, outputs: outputs}
	var err error
	for _, s := range skills {
		cfg := *s.Model
		if f := cfg.InstructionsFile; f != "" {
			b, err := os.ReadFile(c.relative(f))
			if err != nil {
				return nil, fmt.Errorf("%s: skill %s: instructions_file: %w", c.path, s.ID, err)
			}
			cfg.Instructions, cfg.InstructionsFile = string(b), ""
		}
		var agentSkills []model.Skill
		if d := cfg.SkillsDir; d != "" {
			loaded, warnings, err := model.LoadSkills(os.DirFS(c.relative(d)))
			if err != nil {
				return nil, fmt.Errorf("%s: skill %s: skills_dir: %w", c.path, s.ID, err)
			}
			for _, w := range warnings {
				log.Warn("agent skill skipped", slog.String("skill", s.ID), slog.String("dir", c.relative(d)), slog.Any("error", w))
			}
			agentSkills = loaded
		}
		spec := skill.ModelSpec{Model: clients[cfg.Use], Config: cfg, Skills: agentSkills,
			Descriptions: descriptions, TurnBound: bounds[cfg.Use]}
		if o := s.Output; o != nil {
			if spec.Output, err = json.Marshal(o.Schema); err != nil {
				return nil, fmt.Errorf("%s: skill %s: output.schema: %w", c.path, s.ID, err)
			}
			spec.Gated = o.Contract != ""
		}
		if s.ApprovalWhen != "" {
			if spec.ApprovalWhen, err = skill.CompileApprovalWhen(s.ApprovalWhen); err != nil {
				return nil, fmt.Errorf("%s: skill %s: approval_when: %w", c.path, s.ID, err)
			}
			spec.IsApprover = isApprover
		}
		ms.specs[s.ID] = spec
	}
	if rdb != nil {
		ms.state, err = skill.NewRedisState(rdb, c.Store.Namespace)
	} else {
		ms.state, err = skill.OpenBoltState(filepath.Join(c.DataDir, datadir.ExecutorState))
	}
	if err != nil {
		return nil, err
	}
	for id, spec := range ms.specs {
		spec.State = ms.state
		ms.specs[id] = spec
	}
	for id, spec := range ms.outputs {
		spec.State = ms.state
		ms.outputs[id] = spec
	}
	return ms, nil
}

// outputSpec is the output gate of the go, mcp or delegate skill s.
func outputSpec(c *Config, s SkillConfig, isApprover func(string) bool) (skill.OutputSpec, error) {
	var spec skill.OutputSpec
	var err error
	if spec.Schema, err = skill.CompileOutputSchema(s.Output.Schema); err != nil {
		return spec, fmt.Errorf("%s: skill %s: output.schema: %w", c.path, s.ID, err)
	}
	spec.Gated = s.Output.Contract != ""
	if s.ApprovalWhen != "" {
		if spec.ApprovalWhen, err = skill.CompileApprovalWhen(s.ApprovalWhen); err != nil {
			return spec, fmt.Errorf("%s: skill %s: approval_when: %w", c.path, s.ID, err)
		}
		spec.IsApprover = isApprover
	}
	return spec, nil
}

// output wraps x, the executor of skill id, in its output gate, if the
// skill has one; m may be nil.
func (m *modelSkills) output(id string, x a2asrv.AgentExecutor, out *skill.Outbound) a2asrv.AgentExecutor {
	if m == nil {
		return x
	}
	spec, ok := m.outputs[id]
	if !ok {
		return x
	}
	return skill.NewOutput(id, x, spec, out)
}

// turnBound is how long one model round trip to e may take: its timeout
// for every attempt, and the longest backoffs between them (openai-go's,
// at most 8s each, or a Retry-After it honours up to a minute more).
func turnBound(e model.Endpoint) time.Duration {
	timeout, retries := model.DefaultTimeout, model.DefaultMaxRetries
	if e.Timeout > 0 {
		timeout = e.Timeout
	}
	if e.MaxRetries != nil {
		retries = *e.MaxRetries
	}
	return time.Duration(retries+1)*timeout + time.Duration(retries)*8*time.Second + time.Minute
}

// close closes the executor state; nil m has nothing to close.
func (m *modelSkills) close() error {
	if m == nil {
		return nil
	}
	return m.state.Close()
}

// warnUnmatchedGlobs logs, once the MCP servers have had a moment to
// connect, every model skill's tools glob that matches no tool of the
// catalog: a warning, not an error, since servers come and go.
func (a *Agent) warnUnmatchedGlobs(ctx context.Context) {
	if a.models == nil || a.tools == nil {
		return
	}
	settle := time.NewTimer(10 * time.Second)
	defer settle.Stop()
	for connecting(a.tools.manager.Servers()) {
		select {
		case <-a.tools.manager.Updated():
			continue
		case <-settle.C:
		case <-ctx.Done():
			return
		}
		break
	}
	var tools []model.Tool
	if snap := a.tools.manager.Snapshot(); snap != nil {
		for _, t := range snap.Tools {
			tools = append(tools, model.Tool{Name: t.Name})
		}
	}
	for id, spec := range a.models.specs {
		for _, g := range model.UnmatchedGlobs(tools, spec.Config.Tools) {
			a.log.Warn("a model skill's tools glob matches no tool of the catalog yet", slog.String("skill", id), slog.String("glob", g))
		}
	}
}

// connecting reports whether a server has not connected for the first time yet.
func connecting(servers []mcp.ServerStatus) bool {
	for _, s := range servers {
		if s.State == mcp.StateConnecting && s.Connects == 0 {
			return true
		}
	}
	return false
}
