package good

// An Option configures a [Thing].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct{ n int }

// WithN sets n. The default is 1.
func WithN(n int) Option { return optionFunc(func(c *config) { c.n = n }) }
