package agentcard

import (
	"net/http"
	"time"
)

// An Option configures a [Verifier].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is a Verifier's; newConfig makes one.
type config struct {
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
	ttl      time.Duration
	now      func() time.Time // time.Now; tests replace it
}

// WithHTTPClient sets the client that fetches JWKS. By default a client with
// Go's default transport is used. Whichever client, redirects are not
// followed: a redirect could leave the trusted prefix.
func WithHTTPClient(c *http.Client) Option {
	return optionFunc(func(cfg *config) { cfg.client = c })
}

// WithFetchTimeout bounds one JWKS fetch. The default is 10 seconds.
func WithFetchTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.timeout = d })
}

// WithMaxJWKSBytes limits a fetched JWKS's size. The default is 64 KiB; a
// larger one is refused with [ErrJWKSUnavailable].
func WithMaxJWKSBytes(n int64) Option {
	return optionFunc(func(c *config) { c.maxBytes = n })
}

// WithJWKSCacheTTL sets how long a fetched JWKS is used before it is fetched
// again. The default is 10 minutes. A kid missing from a cached JWKS that is
// a minute old or more triggers an early fetch, so new keys are seen at once.
func WithJWKSCacheTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.ttl = d })
}

// newConfig applies the defaults, then opts.
func newConfig(opts []Option) config {
	cfg := config{timeout: 10 * time.Second, maxBytes: 64 << 10, ttl: 10 * time.Minute, now: time.Now}
	for _, o := range opts {
		o.apply(&cfg)
	}
	client := http.Client{}
	if cfg.client != nil {
		client = *cfg.client // a copy: the caller's client keeps following redirects
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.client = &client
	return cfg
}
