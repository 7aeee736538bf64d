package delegation

import (
	"log/slog"
	"net/http"
	"time"
)

// An Option configures a [Directory].
type Option interface{ apply(*dirConfig) }

type optionFunc func(*dirConfig)

func (f optionFunc) apply(c *dirConfig) { f(c) }

// dirConfig is a Directory's; newDirConfig makes one.
type dirConfig struct {
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
	log      *slog.Logger
}

// WithHTTPClient sets the client that fetches cards and the JWKS their
// signatures name. By default a client with Go's default transport is used.
// Whichever client, redirects are not followed: the configured URL is the
// peer's, and a redirect could lead anywhere.
func WithHTTPClient(c *http.Client) Option {
	return optionFunc(func(cfg *dirConfig) { cfg.client = c })
}

// WithFetchTimeout bounds one card fetch, and one fetch of a JWKS a card
// names. The default is 10 seconds.
func WithFetchTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *dirConfig) { cfg.timeout = d })
}

// WithLogger sets the logger that tells the operator when a peer is
// refused or unreachable (at warn, with the reason) and when it verifies
// again (at info); each is logged when the peer's state or reason
// changes, not at every refresh. By default nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(cfg *dirConfig) { cfg.log = l })
}

// WithMaxCardBytes limits a fetched card's size. The default is 1 MiB; a
// larger card is refused with [ErrCardTooLarge].
func WithMaxCardBytes(n int64) Option {
	return optionFunc(func(cfg *dirConfig) { cfg.maxBytes = n })
}

// newDirConfig applies the defaults, then opts.
func newDirConfig(opts []Option) dirConfig {
	cfg := dirConfig{timeout: 10 * time.Second, maxBytes: 1 << 20, log: slog.New(slog.DiscardHandler)}
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

// A SenderOption configures a [Sender].
type SenderOption interface{ applySender(*Sender) }

type senderOptionFunc func(*Sender)

func (f senderOptionFunc) applySender(s *Sender) { f(s) }

// WithTransport sends every request to peers through rt (tracing, say).
// By default Go's default transport is used.
func WithTransport(rt http.RoundTripper) SenderOption {
	return senderOptionFunc(func(s *Sender) { s.http.Transport = rt })
}
