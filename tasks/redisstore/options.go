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
	keep    tasks.Retention
	blobs   *tasks.BlobIndex
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

// WithRetention has Redis expire the keys of a finished task on its own,
// [ExpiryGrace] after the window r gives its tenant, so that memory stays
// bounded even when no purge runs; a purge ([Store.Purge]) normally deletes
// the task first, with its index entries. Without it no key expires.
func WithRetention(r tasks.Retention) Option {
	return optionFunc(func(c *config) { c.keep = r })
}

// WithBlobIndex has the store keep which blobs each task names, so that
// [Store.Purge] reports the blobs no kept task names any more. Without it a
// purge reports none.
func WithBlobIndex(x tasks.BlobIndex) Option {
	return optionFunc(func(c *config) { c.blobs = &x })
}
