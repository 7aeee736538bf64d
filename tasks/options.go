package tasks

import (
	"context"
	"log/slog"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures an [Engine].
type Option interface{ apply(*engineConfig) }

type optionFunc func(*engineConfig)

func (f optionFunc) apply(c *engineConfig) { f(c) }

type engineConfig struct {
	caps          a2a.AgentCapabilities
	maxConcurrent int
	idleTimeout   time.Duration
	extendedCard  func(context.Context) (*a2a.AgentCard, error)
	logger        *slog.Logger
	onCommit      func(a2a.TaskID)
	onPushConfig  func(a2a.TaskID)
	isApprover    func(principal string) bool
	checkPushURL  func(context.Context, string) error
	leaseTTL      time.Duration
	// idempotencyKey reads a message's idempotency key; nil: none has one.
	idempotencyKey func(*a2a.Message) string
	listPageBytes  int
	observer       Observer
	lifecycle      LifecycleObserver
	tracer         trace.Tracer // nil: no spans
}

func defaultConfig() engineConfig {
	return engineConfig{
		caps:          a2a.AgentCapabilities{Streaming: true},
		maxConcurrent: 256,
		idleTimeout:   2 * time.Minute,
		leaseTTL:      DefaultLeaseTTL,
		listPageBytes: DefaultListPageBytes,
		logger:        slog.Default(),
	}
}

// WithCapabilities sets what the engine serves. By default streaming is on,
// and push configs and the extended card are off: their methods answer
// PushNotificationNotSupported and UnsupportedOperation.
func WithCapabilities(c a2a.AgentCapabilities) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.caps = c })
}

// WithMaxConcurrent bounds the executions that run at once; further
// messages wait for a slot until their request's context ends. The default
// is 256.
func WithMaxConcurrent(n int) Option {
	return optionFunc(func(cfg *engineConfig) {
		if n > 0 {
			cfg.maxConcurrent = n
		}
	})
}

// WithIdleTimeout sets how long an executor may go without yielding an event
// before its task is failed and its context cancelled. The default is two
// minutes; zero or less turns the watchdog off. An executor that is a
// [QuietBound] may ask for longer.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.idleTimeout = d })
}

// WithExtendedCard sets the card served by GetExtendedAgentCard when the
// capabilities declare it. By default there is none: the method answers
// ExtendedCardNotConfigured.
func WithExtendedCard(f func(context.Context) (*a2a.AgentCard, error)) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.extendedCard = f })
}

// WithLogger sets the logger; the default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(cfg *engineConfig) {
		if l != nil {
			cfg.logger = l
		}
	})
}

// WithCommitHook sets a function called after each write of a task's events
// has been stored and published; push delivery uses it to wake up. It must
// not block. By default nothing is called.
func WithCommitHook(f func(a2a.TaskID)) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.onCommit = f })
}

// WithPushURLCheck sets the check every push config's URL must pass before
// it is stored (the SSRF guard); a refusal answers InvalidParams with its
// reason. By default every URL is refused: push targets are opt-in.
func WithPushURLCheck(f func(ctx context.Context, url string) error) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.checkPushURL = f })
}

// WithApprovers lets the authenticated callers whose principal (the name
// a2a-go's call context gives its user) isApprover accepts answer an
// approval request on another caller's task while it waits for input, when
// the executor is an [ApprovalReader]: an approval is the one message they
// may send to it (any other is refused as TaskNotFound), the owner's history
// keeps only its decision, and they get back the task's id and status, not
// its history or artifacts. The task stays its owner's; nothing else of it
// is visible to them. isApprover is asked at every such message, so it may
// answer from a list that a reload replaces. By default nobody may;
// anonymous callers never may.
func WithApprovers(isApprover func(principal string) bool) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.isApprover = isApprover })
}

// WithPushConfigHook sets a function called after a push config of a task
// was stored; push delivery uses it to start watching the task. It must not
// block. By default nothing is called.
func WithPushConfigHook(f func(a2a.TaskID)) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.onPushConfig = f })
}

// WithIdempotencyKey sets how the engine reads a new message's idempotency
// key. A message with a key starts at most one task per caller (principal
// and tenant) and key: a repeat, even a concurrent one, gets the existing
// task (a blocking send waits for it as for its own, a stream follows it)
// and starts nothing. The task id is derived from caller and key, so the
// store finds it after a restart too. By default no message has a key.
func WithIdempotencyKey(key func(*a2a.Message) string) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.idempotencyKey = key })
}

// DefaultLeaseTTL is how long a replica's lease of a running task outlives
// its last renewal.
const DefaultLeaseTTL = 6 * time.Second

// WithLeaseTTL sets, for an engine on a store that replicas share (Redis),
// how long the lease of a running task outlives its replica: leases are
// renewed every ttl/3, and every ttl/2 each replica takes over the
// unfinished tasks whose lease expired, so a dead replica's task is resumed
// or failed within about 1.5 ttl. The default is [DefaultLeaseTTL]; values
// under 300ms are raised to it. An engine on the embedded store ignores it.
func WithLeaseTTL(ttl time.Duration) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.leaseTTL = max(ttl, 300*time.Millisecond) })
}

// DefaultListPageBytes is the default byte cap of a ListTasks page.
const DefaultListPageBytes = 4 << 20

// WithListPageBytes caps the size of a ListTasks page, its tasks as encoded
// in JSON: a page ends before the task that would take it over n, and its
// nextPageToken continues from there; a single task larger than n comes
// alone, trimmed as the request asks. The default is
// [DefaultListPageBytes]; zero or less keeps it.
func WithListPageBytes(n int) Option {
	return optionFunc(func(cfg *engineConfig) {
		if n > 0 {
			cfg.listPageBytes = n
		}
	})
}

// WithObserver reports every append the engine makes, and every state a
// task enters with it, to o (metrics). By default nothing is observed.
func WithObserver(o Observer) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.observer = o })
}

// WithLifecycleObserver reports each task's creation and its end to o,
// once each, after the write that made them is stored (hooks). By default
// nothing is reported.
func WithLifecycleObserver(o LifecycleObserver) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.lifecycle = o })
}

// WithTracerProvider has the engine trace each task's execution and each
// append to the store with tp's tracer, the execution's span a child of the
// request that started it. By default nothing is traced.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(cfg *engineConfig) { cfg.tracer = tp.Tracer("github.com/handoff-a2a/handoff/tasks") })
}
