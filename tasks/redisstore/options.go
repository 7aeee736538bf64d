package redisstore

import (
	"time"

	"github.com/handoff-a2a/handoff/tasks"
)

// An Option configures [Open].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	timeout time.Duration
	sealer  *tasks.Sealer // nil: push secrets stored as given
}

func defaultConfig() config { return config{timeout: 2 * time.Second} }

// WithTimeout bounds each call of the store: dialing, reading and
// writing, and the call as a whole when its context has no earlier deadline.
// The default is two seconds, so a Redis that is down fails calls with
// [ErrUnavailable] instead of holding requests. The URL's own timeout
// parameters are replaced by it.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	})
}

// WithSealer seals the secrets of push configs with s before the store
// keeps them, and opens them when it reads them back. Without it they are
// stored as given, and a sealed one read back fails with
// [tasks.ErrUnsealable].
func WithSealer(s *tasks.Sealer) Option {
	return optionFunc(func(c *config) { c.sealer = s })
}
