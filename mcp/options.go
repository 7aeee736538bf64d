package mcp

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff/mcp/policy"
)

// Options follow connect-go's scheme: a ManagerOption configures a [Manager],
// a PipelineOption a [Pipeline], a FaceOption a [Face], and an Option, such
// as [WithLogger], fits all the types it names.

// An Option configures a [Manager], a [Pipeline] and a [Face] alike.
type Option interface {
	ManagerOption
	PipelineOption
	FaceOption
}

// A ManagerOption configures a [Manager].
type ManagerOption interface{ applyManager(*config) }

// A PipelineOption configures a [Pipeline].
type PipelineOption interface{ applyPipeline(*pipelineConfig) }

// A FaceOption configures a [Face].
type FaceOption interface{ applyFace(*faceConfig) }

type managerOptionFunc func(*config)

func (f managerOptionFunc) applyManager(c *config) { f(c) }

type pipelineOptionFunc func(*pipelineConfig)

func (f pipelineOptionFunc) applyPipeline(c *pipelineConfig) { f(c) }

type faceOptionFunc func(*faceConfig)

func (f faceOptionFunc) applyFace(c *faceConfig) { f(c) }

// config is a Manager's; newManagerConfig makes one.
type config struct {
	logger           *slog.Logger
	lookupEnv        LookupEnv
	callTimeout      time.Duration
	minBackoff       time.Duration
	maxBackoff       time.Duration
	unavailableAfter int
	httpClient       *http.Client
	// dial replaces a server's configured transport; only tests set it (export_test.go).
	dial map[string]func() (mcpsdk.Transport, error)
}

// newManagerConfig applies the defaults, then opts.
func newManagerConfig(opts []ManagerOption) config {
	c := config{
		logger:           slog.New(slog.DiscardHandler),
		lookupEnv:        os.LookupEnv,
		callTimeout:      30 * time.Second,
		minBackoff:       100 * time.Millisecond,
		maxBackoff:       30 * time.Second,
		unavailableAfter: 3,
		httpClient:       &http.Client{},
	}
	for _, o := range opts {
		o.applyManager(&c)
	}
	return c
}

// pipelineConfig is a Pipeline's (its policy's); newPipelineConfig makes one.
type pipelineConfig struct {
	isApprover   func(principal string) bool // nil: nobody may approve
	key          []byte
	deny         []string
	rules        []policy.Rule
	grants       GrantStore // nil: no grants beyond once approvals
	hooks        []Hook
	hookClient   *http.Client // nil: http hooks are refused
	logger       *slog.Logger
	lookupEnv    LookupEnv
	auditTimeout time.Duration
}

// newPipelineConfig applies the defaults, then opts.
func newPipelineConfig(opts []PipelineOption) pipelineConfig {
	c := pipelineConfig{auditTimeout: 10 * time.Second, logger: slog.New(slog.DiscardHandler), lookupEnv: os.LookupEnv}
	for _, o := range opts {
		o.applyPipeline(&c)
	}
	return c
}

// faceConfig is a Face's; newFaceConfig makes one.
type faceConfig struct {
	logger      *slog.Logger
	cancelGrace time.Duration
	publicHosts []string // Host names accepted besides loopback ones on a loopback listener
}

// newFaceConfig applies the defaults, then opts.
func newFaceConfig(opts []FaceOption) faceConfig {
	c := faceConfig{logger: slog.New(slog.DiscardHandler), cancelGrace: 10 * time.Second}
	for _, o := range opts {
		o.applyFace(&c)
	}
	return c
}

// WithPublicHosts names the hosts a [Face] listening on a loopback address
// is reached by besides loopback names: the agent's public host behind a
// reverse proxy on the same machine. By default a request to a loopback
// listener must name a loopback host (DNS rebinding protection, as the MCP
// security guidance asks of local servers), so a proxy that forwards
// Host: agents.example.com would be refused.
func WithPublicHosts(hosts ...string) FaceOption {
	return faceOptionFunc(func(c *faceConfig) { c.publicHosts = append(c.publicHosts, hosts...) })
}

// loggerOption is [WithLogger]'s: one logger for each type it configures.
type loggerOption struct{ l *slog.Logger }

func (o loggerOption) applyManager(c *config)          { c.logger = o.l }
func (o loggerOption) applyPipeline(c *pipelineConfig) { c.logger = o.l }
func (o loggerOption) applyFace(c *faceConfig)         { c.logger = o.l }

// WithLogger sets the logger: a Manager's for connects, disconnects and catalog changes, a
// Pipeline's for the observing hooks that failed, a Face's for the tasks it could not cancel
// and the SDK's warnings. By default nothing is logged.
func WithLogger(l *slog.Logger) Option { return loggerOption{l} }

// WithLookupEnv sets where ${VAR} in Env and Headers, PATH and InheritEnv are read from. The
// default is [os.LookupEnv]: the agent's own environment.
func WithLookupEnv(f LookupEnv) ManagerOption {
	return managerOptionFunc(func(c *config) { c.lookupEnv = f })
}

// WithCallTimeout sets the deadline of a call whose [CallRequest.Timeout] is zero. The default
// is 30s; the SDK itself sets none, so every call gets one.
func WithCallTimeout(d time.Duration) ManagerOption {
	return managerOptionFunc(func(c *config) { c.callTimeout = d })
}

// WithBackoff sets the delays between reconnect attempts: the first is first, each next one
// doubles (with jitter) up to limit. The default is 100ms up to 30s.
func WithBackoff(first, limit time.Duration) ManagerOption {
	return managerOptionFunc(func(c *config) {
		first = max(first, time.Millisecond) // zero would spin on a server that never starts
		c.minBackoff, c.maxBackoff = first, max(first, limit)
	})
}

// WithUnavailableAfter sets how many connect attempts in a row must fail before a server is
// marked unavailable and its tools leave the catalog. The default is 3. Until then a server
// that was serving keeps its tools, and calls wait for the reconnect within their deadline.
func WithUnavailableAfter(n int) ManagerOption {
	return managerOptionFunc(func(c *config) { c.unavailableAfter = max(n, 1) })
}

// WithHTTPClient sets the client for http servers. The default is a fresh client with no
// overall timeout (streams are long-lived; every call has its own deadline).
func WithHTTPClient(hc *http.Client) ManagerOption {
	return managerOptionFunc(func(c *config) { c.httpClient = hc })
}

// WithApprovers lets the principals isApprover accepts approve calls the policy asks about.
// isApprover is asked at every approval a Run checks, so it may answer from a list a reload
// replaces without reconfiguring the Pipeline; an empty principal is never asked, since it
// would match an unauthenticated caller. By default nobody may approve, so a tool that needs
// an approval never runs. A principal may approve calls it proposed itself.
func WithApprovers(isApprover func(principal string) bool) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.isApprover = isApprover })
}

// WithApprovalKey sets the HMAC key that binds approval tokens; it must be at least 32
// bytes. By default a random key is drawn per Pipeline (and kept by
// [Pipeline.Reconfigure]), so approvals requested before a restart do not verify after it
// (the task must ask again), and replicas cannot verify each other's tokens: give every
// Pipeline the same key to change that.
func WithApprovalKey(key []byte) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.key = bytes.Clone(key) })
}

// WithDeny adds path.Match globs on catalog names ("server__delete_*") whose calls are
// always denied, whatever their contract says. By default nothing is denied here; the
// Manager's per-server filters already hide tools from the catalog.
func WithDeny(globs ...string) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.deny = append(c.deny, globs...) })
}

// WithPolicy adds policy rules (see [policy.Rule]) after the WithDeny globs. By default there
// are none, and the contracts alone decide (see [Decision]). The rules are compiled by
// [NewPipeline] and [Pipeline.Reconfigure], which refuse a set with any problem.
func WithPolicy(rules ...policy.Rule) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.rules = append(c.rules, rules...) })
}

// WithGrants keeps the grants that task and scope approvals make in store, and consults it
// at every call by an authenticated caller (see [Approval.Scope]). By default there is no
// store: an approval covers its one call, and a wider one is refused.
func WithGrants(store GrantStore) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.grants = store })
}

// WithHooks adds hooks run at fixed points of every call (see [Hook] and [HookPoint]), in
// the order given. By default there are none.
func WithHooks(hooks ...Hook) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.hooks = append(c.hooks, hooks...) })
}

// WithHookClient sets the client http hooks are called with: the agent gives its push SSRF
// guard's ([push.Guard.Client]), so that a hook URL reaches only what a push target may. By
// default there is none, and a pipeline with an http hook is refused.
func WithHookClient(hc *http.Client) PipelineOption {
	return pipelineOptionFunc(func(c *pipelineConfig) { c.hookClient = hc })
}
