package acceptance

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// An Option configures a [Gate].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is a Gate's; newConfig makes one.
type config struct {
	maxReverify int
	now         func() time.Time
	tracer      trace.Tracer // nil: no spans
	decided     func(ctx context.Context, skill string, c Completion, d Decision)
}

// WithMaxReverify bounds how many times an Unknown is decided again before it settles. The
// default is 5: a completion is decided at most six times. A negative n counts as 0.
func WithMaxReverify(n int) Option { return optionFunc(func(c *config) { c.maxReverify = max(n, 0) }) }

// WithClock sets the clock freshness is judged by. The default is time.Now.
func WithClock(now func() time.Time) Option { return optionFunc(func(c *config) { c.now = now }) }

// WithTracerProvider makes each [Gate.Decide] a span, handoff.gate.decide,
// with tp's tracer: a child of the span in its context (the task's
// execution), with the skill, the peer, the outcome and the number of
// checks, in error unless the completion was committed. The verifiers'
// tool calls run under it. By default the gate makes no spans.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tracer = tp.Tracer("github.com/handoff-a2a/handoff/acceptance") })
}

// WithDecided has f told of each decision [Gate.Decide] makes, after the
// ledger holds a commit (not of a completion it could not decide: an error):
// for observers such as the agent's gate_decided hooks. f runs on the
// deciding goroutine and must not block. By default nobody is told.
func WithDecided(f func(ctx context.Context, skill string, c Completion, d Decision)) Option {
	return optionFunc(func(c *config) { c.decided = f })
}

// newConfig applies the defaults, then opts.
func newConfig(opts []Option) config {
	cfg := config{maxReverify: 5, now: time.Now}
	for _, o := range opts {
		o.apply(&cfg)
	}
	return cfg
}
