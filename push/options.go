package push

import (
	"log/slog"
	"net"
	"time"
)

// A DispatcherOption configures a [Dispatcher].
type DispatcherOption interface{ applyDispatcher(*dispatchConfig) }

type dispatcherOptionFunc func(*dispatchConfig)

func (f dispatcherOptionFunc) applyDispatcher(c *dispatchConfig) { f(c) }

// dispatchConfig is a Dispatcher's; newDispatchConfig makes one.
type dispatchConfig struct {
	maxAttempts int
	maxAge      time.Duration
	baseDelay   time.Duration
	maxDelay    time.Duration
	timeout     time.Duration
	claimIdle   time.Duration
	logger      *slog.Logger
	observer    Observer
	now         func() time.Time // time.Now; tests replace it
}

// newDispatchConfig applies the defaults, then opts.
func newDispatchConfig(opts []DispatcherOption) dispatchConfig {
	cfg := dispatchConfig{maxAttempts: 8, maxAge: 24 * time.Hour, baseDelay: time.Second, maxDelay: 5 * time.Minute,
		timeout: 10 * time.Second, claimIdle: DefaultClaimIdle, logger: slog.Default(), now: time.Now}
	for _, o := range opts {
		o.applyDispatcher(&cfg)
	}
	return cfg
}

// WithRetries bounds the retries of one event: after maxAttempts attempts,
// or once maxAge has passed since its first attempt, it is dead-lettered.
// The defaults are 8 attempts and 24 hours.
func WithRetries(maxAttempts int, maxAge time.Duration) DispatcherOption {
	return dispatcherOptionFunc(func(c *dispatchConfig) { c.maxAttempts, c.maxAge = maxAttempts, maxAge })
}

// WithBackoff sets the delays between the attempts of one event: the first
// retry waits first, each next one doubles (with jitter) up to limit, and a
// Retry-After the webhook answers is also capped at limit. The default is 1s
// up to 5min.
func WithBackoff(first, limit time.Duration) DispatcherOption {
	return dispatcherOptionFunc(func(c *dispatchConfig) { c.baseDelay, c.maxDelay = first, limit })
}

// WithTimeout bounds one POST. The default is 10 s.
func WithTimeout(d time.Duration) DispatcherOption {
	return dispatcherOptionFunc(func(c *dispatchConfig) { c.timeout = d })
}

// WithObserver reports every delivery attempt to o (metrics). By default
// attempts are not observed.
func WithObserver(o Observer) DispatcherOption {
	return dispatcherOptionFunc(func(c *dispatchConfig) { c.observer = o })
}

// WithLogger sets the logger for failed attempts, dead letters and store
// errors. The default is slog.Default().
func WithLogger(l *slog.Logger) DispatcherOption {
	return dispatcherOptionFunc(func(c *dispatchConfig) { c.logger = l })
}

// WithClaimIdle sets, for a dispatcher on a store replicas share (Redis),
// after how long the jobs and task locks of a replica that stopped touching
// them (it died) are claimed by another replica; a live replica touches its
// own every third of it. The default is [DefaultClaimIdle]. Without a
// shared store it has no effect.
func WithClaimIdle(d time.Duration) DispatcherOption {
	return dispatcherOptionFunc(func(c *dispatchConfig) {
		if d > 0 {
			c.claimIdle = d
		}
	})
}

// A GuardOption configures a [Guard].
type GuardOption interface{ applyGuard(*guardConfig) }

type guardOptionFunc func(*guardConfig)

func (f guardOptionFunc) applyGuard(c *guardConfig) { f(c) }

// guardConfig is a Guard's; newGuardConfig makes one.
type guardConfig struct {
	resolver Resolver
}

// newGuardConfig applies the defaults, then opts.
func newGuardConfig(opts []GuardOption) guardConfig {
	cfg := guardConfig{resolver: net.DefaultResolver}
	for _, o := range opts {
		o.applyGuard(&cfg)
	}
	return cfg
}

// WithResolver makes the Guard resolve host names with r, both in
// [Guard.CheckURL] and when its client dials. By default it uses
// net.DefaultResolver.
func WithResolver(r Resolver) GuardOption {
	return guardOptionFunc(func(c *guardConfig) { c.resolver = r })
}
