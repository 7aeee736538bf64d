package artifacts

// defaultMaxBytes bounds an artifact (or a raw blob) when no option says otherwise.
const defaultMaxBytes = 16 << 20

// An Option configures an [Assembler] or a [Store].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is an Assembler's or a Store's; newConfig makes one.
type config struct {
	maxBytes int64
}

// WithMaxBytes sets the size limit. The default is 16 MiB; a limit of zero
// or less keeps the default, so a missing config value never means "no
// limit". An [Assembler] counts the content of all the artifacts it holds
// unfinished, a [Store] the content of one artifact ([ContentSize]), and
// [Store.PutRaw] uses it when called without its own limit.
func WithMaxBytes(n int64) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxBytes = n
		}
	})
}

// newConfig applies the defaults, then opts.
func newConfig(opts []Option) config {
	c := config{maxBytes: defaultMaxBytes}
	for _, o := range opts {
		o.apply(&c)
	}
	return c
}
