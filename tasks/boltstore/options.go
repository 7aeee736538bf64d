package boltstore

import "github.com/handoff-a2a/handoff/tasks"

// An Option configures [Open].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	sealer *tasks.Sealer // nil: push secrets stored as given
	blobs  *tasks.BlobIndex
}

// WithSealer seals the secrets of push configs with s before the store
// keeps them, and opens them when it reads them back; a
// [tasks.ListingSealer] opens the store only to list them. Without it they
// are stored as given, and a sealed one read back fails with
// [tasks.ErrUnsealable].
func WithSealer(s *tasks.Sealer) Option {
	return optionFunc(func(c *config) { c.sealer = s })
}

// WithBlobIndex has the store keep which blobs each task names, so that
// [Store.Purge] reports the blobs no kept task names any more. Without it a
// purge reports none.
func WithBlobIndex(x tasks.BlobIndex) Option {
	return optionFunc(func(c *config) { c.blobs = &x })
}
