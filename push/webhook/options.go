package webhook

import (
	"log/slog"
	"net/http"
	"time"
)

// An Option configures a [Verifier].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is a Verifier's; newConfig makes one.
type config struct {
	token  string
	issuer string
	maxAge time.Duration
	client *http.Client
	now    func() time.Time
	logger *slog.Logger
}

// WithToken also requires the push config's notification token, in
// [HeaderToken] or, when that is absent, [HeaderTokenX]. By default no token
// is required. The token is not covered by the signature; it tells apart
// configs that share one webhook.
func WithToken(t string) Option {
	return optionFunc(func(c *config) { c.token = t })
}

// WithIssuer also requires the JWT's iss to be iss, the agent's card URL or
// base URL as the agent signs it. By default iss is not checked: the JWKS
// already names the agent.
func WithIssuer(iss string) Option {
	return optionFunc(func(c *config) { c.issuer = iss })
}

// WithMaxAge sets how old a delivery's iat may be; the default is 5 minutes,
// the lifetime of the agent's signatures. An iat ahead of the clock by more
// than one minute is refused whatever the max age. Values <= 0 keep the
// default.
func WithMaxAge(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.maxAge = d
		}
	})
}

// WithHTTPClient sets the client that fetches the JWKS. By default it is a
// client with a 5 second timeout.
func WithHTTPClient(hc *http.Client) Option {
	return optionFunc(func(c *config) { c.client = hc })
}

// WithClock sets the clock iat and exp are checked against; the default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}

// WithLogger makes [Verifier.Middleware] log each refused delivery once, at
// level Warn, with its reason and remote address. By default refusals are
// not logged.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// newConfig applies the defaults, then opts.
func newConfig(opts []Option) config {
	cfg := config{
		maxAge: defaultMaxAge,
		client: &http.Client{Timeout: 5 * time.Second},
		now:    time.Now,
		logger: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o.apply(&cfg)
	}
	return cfg
}
