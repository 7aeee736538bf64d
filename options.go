package handoff

import (
	"log/slog"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// An Option configures an [Agent].
type Option interface{ apply(*agentOptions) }

type optionFunc func(*agentOptions)

func (f optionFunc) apply(o *agentOptions) { f(o) }

// agentOptions are what the options set; [New] applies them, then fills in
// the logger's default.
type agentOptions struct {
	logger    *slog.Logger
	executors map[string]a2asrv.AgentExecutor // by skill id, for the `go` skills
}

// WithLogger sets the agent's logger. By default it logs to stderr at the
// config's level and format.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *agentOptions) { o.logger = l }) }

// WithExecutor runs the skill skillID, declared with `executor: go` in the
// config, with x: an executor written for a2a-go runs unchanged. Inside
// Execute, x reaches the agent's MCP tools only through [Tools], which
// governs every call. By default an agent has no Go executor, so a config
// with a `go` skill needs one WithExecutor for each: New fails when a `go`
// skill has no executor, or when skillID names no `go` skill.
func WithExecutor(skillID string, x a2asrv.AgentExecutor) Option {
	return optionFunc(func(o *agentOptions) {
		if o.executors == nil {
			o.executors = map[string]a2asrv.AgentExecutor{}
		}
		o.executors[skillID] = x
	})
}
