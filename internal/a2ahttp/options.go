package a2ahttp

import (
	"log/slog"
	"time"
)

// An Option configures a [Face].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is a Face's settings: the defaults, then the caller's options.
type config struct {
	maxBody    int64
	bodyTime   time.Duration
	inflight   int64
	writeStall time.Duration
	log        *slog.Logger
	observer   Observer
}

func newConfig(opts []Option) config {
	c := config{maxBody: 4 << 20, bodyTime: 30 * time.Second, inflight: 64 << 20, writeStall: 10 * time.Second, log: slog.Default()}
	for _, o := range opts {
		o.apply(&c)
	}
	return c
}

// WithMaxBodyBytes bounds one request body of the JSON-RPC, REST and MCP
// routes. The default is 4 MiB; a larger body is answered 413 without being
// read.
func WithMaxBodyBytes(n int64) Option { return optionFunc(func(c *config) { c.maxBody = n }) }

// WithBodyReadTimeout bounds reading one request body, counted from the end
// of its headers. The default is 30 s; a slower body is answered 408.
func WithBodyReadTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.bodyTime = d })
}

// WithInflightBodyBytes bounds the bytes of request bodies held at once,
// across all requests. The default is 64 MiB; a body that finds no room is
// answered 503 with Retry-After at once, never queued.
func WithInflightBodyBytes(n int64) Option { return optionFunc(func(c *config) { c.inflight = n }) }

// WithWriteStall bounds each response write and flush: one that makes no
// progress for d fails, and its connection (HTTP/1) or stream (HTTP/2)
// ends. The default is 10 s.
func WithWriteStall(d time.Duration) Option { return optionFunc(func(c *config) { c.writeStall = d }) }

// WithLogger sets the logger of the request log (one debug line per request)
// and of a2a-go's transports. The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.log = l }) }

// WithObserver reports every A2A request of the JSON-RPC, REST and gRPC
// bindings to o (metrics). By default requests are not observed.
func WithObserver(o Observer) Option { return optionFunc(func(c *config) { c.observer = o }) }
