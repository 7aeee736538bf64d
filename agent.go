package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
	"github.com/handoff-a2a/handoff/internal/a2aconnect"
	"github.com/handoff-a2a/handoff/internal/a2ahttp"
	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/console"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/metrics"
	"github.com/handoff-a2a/handoff/internal/tracing"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// Agent is one running A2A agent. Make it with [New], run it with [Agent.Serve].
type Agent struct {
	cfg     *Config
	log     *slog.Logger
	store   agentStore
	tools   *tools       // nil without MCP servers
	del     *delegating  // nil when no skill delegates
	models  *modelSkills // nil when no skill has executor: model
	hooks   *hookObservers
	selfHop atomic.Pointer[delegation.Hop]
	engine  *tasks.Engine
	handler a2asrv.RequestHandler
	authn   *auth.Authenticator
	keys    *agentcard.KeySet
	guard   *push.Guard
	metrics *metrics.Registry // nil when metrics are off
	tracing *tracing.Tracing  // nil unless the OTEL_* environment asks for traces
	// dispatcher delivers push notifications while Serve runs.
	dispatcher atomic.Pointer[push.Dispatcher]
	// extended is the extended card, set when the routes know the base URL.
	extended atomic.Pointer[a2a.AgentCard]
	// console is the operator console, set when the routes are built
	// (unless the config turns it off); its live pages hear of commits.
	console atomic.Pointer[console.Console]

	closeOnce sync.Once
	closeErr  error

	// approvers is cfg.Approvers until a Reload replaces it.
	approvers atomic.Pointer[[]string]
}

// checkEnvelope enforces a delegated message's envelope before anything
// runs: hop limit, deadline, scopes, cycles.
func (a *Agent) checkEnvelope(m *a2a.Message) error {
	env, ok, err := delegation.EnvelopeFrom(m)
	if err != nil {
		return a2a.NewError(a2a.ErrInvalidParams, "delegation envelope: "+err.Error())
	}
	if !ok {
		return nil
	}
	policy := delegation.ReceiverPolicy{MaxHops: a.cfg.Delegation.MaxHops, Granted: a.cfg.Delegation.GrantScopes}
	if err := delegation.Check(env, *a.selfHop.Load(), policy, time.Now()); err != nil {
		return a2a.NewError(a2a.ErrInvalidParams, "delegation refused: "+err.Error())
	}
	return nil
}

// agentStore is the task store with the readiness check both backends have.
type agentStore interface {
	tasks.Store
	Ping(ctx context.Context) error
}

// openStore opens the store the config names: bbolt in the data directory
// (the default), or Redis. Either seals push configs' secrets (see
// storeSealer).
func openStore(ctx context.Context, cfg *Config, keys *agentcard.KeySet) (agentStore, error) {
	sealer, err := storeSealer(cfg, keys)
	if err != nil {
		return nil, err
	}
	boltOpts, redisOpts := retentionOptions(cfg)
	if cfg.Store.Kind == "redis" {
		s, err := redisstore.Open(ctx, cfg.Store.URL, cfg.Store.Namespace, append(redisOpts, redisstore.WithSealer(sealer))...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s, err := boltstore.Open(filepath.Join(cfg.DataDir, datadir.TaskStore), 2*time.Second, append(boltOpts, boltstore.WithSealer(sealer))...)
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("%w (is another agent using data directory %s?)", err, cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// sharedRedis is the task store's Redis client when the agent runs on Redis,
// nil otherwise: the ledger and the audit log use it, so every replica
// shares them.
func sharedRedis(s agentStore) redis.UniversalClient {
	if r, ok := s.(*redisstore.Store); ok {
		return r.Client()
	}
	return nil
}

// NewLogger returns the logger a config asks for, writing to stderr.
func NewLogger(c *Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// New opens the agent's store (creating its data directory) and builds its
// engine. Tasks left running by a previous process end failed here.
func New(ctx context.Context, cfg *Config, opts ...Option) (*Agent, error) {
	var o agentOptions
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.logger == nil {
		o.logger = NewLogger(cfg)
	}
	if err := checkExecutors(cfg, o.executors); err != nil {
		return nil, err
	}
	authn, err := newAuthenticator(&cfg.Auth, o.logger)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	keys, err := loadKeySet(cfg, o.logger)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, cfg, keys)
	if err != nil {
		return nil, err
	}
	rdb := sharedRedis(store)
	tel, err := newTelemetry(ctx, cfg)
	if err != nil {
		store.Close()
		return nil, err
	}
	if tel.tracing != nil {
		o.logger = slog.New(tracing.LogHandler(o.logger.Handler()))
	}
	m := tel.metrics
	tl, err := newTools(cfg, rdb, o.logger, tel)
	if err != nil {
		store.Close()
		return nil, err
	}
	if m != nil && tl != nil {
		if err := m.WatchServers(func() []metrics.ServerHealth { return serverHealth(tl.manager) }); err != nil {
			store.Close()
			tl.audit.Close()
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	a := &Agent{cfg: cfg, log: o.logger, store: store, tools: tl, authn: authn, keys: keys, guard: push.NewGuard(cfg.Push.AllowHosts),
		metrics: m, tracing: tel.tracing}
	a.selfHop.Store(&delegation.Hop{Agent: cfg.Name})
	approvers := slices.Clone(cfg.Approvers)
	a.approvers.Store(&approvers)
	if a.hooks, err = newHookObservers(cfg, o.logger); err != nil {
		a.closeStores()
		return nil, err
	}
	if a.del, err = newDelegating(cfg, rdb, tl, o.logger, func() delegation.Hop { return *a.selfHop.Load() }, tel, a.hooks); err != nil {
		a.closeStores()
		return nil, err
	}
	engineOpts := []tasks.Option{
		tasks.WithCapabilities(a2a.AgentCapabilities{
			Streaming:         *cfg.Capabilities.Streaming,
			PushNotifications: cfg.Capabilities.PushNotifications,
			ExtendedAgentCard: cfg.ExtendedCard != nil,
		}),
		tasks.WithExtendedCard(func(ctx context.Context) (*a2a.AgentCard, error) {
			return extendedCard(a.extended.Load())(ctx)
		}),
		tasks.WithPushURLCheck(a.guard.CheckURL),
		tasks.WithApprovers(a.isApprover),
		tasks.WithCommitHook(func(id a2a.TaskID) {
			if d := a.dispatcher.Load(); d != nil {
				d.Notify(id)
			}
			if c := a.console.Load(); c != nil {
				c.Notify(id)
			}
		}),
		tasks.WithPushConfigHook(func(id a2a.TaskID) {
			if d := a.dispatcher.Load(); d != nil {
				d.Watch(id)
			}
		}),
		tasks.WithIdempotencyKey(envelopeKey),
		tasks.WithMaxConcurrent(cfg.Limits.MaxConcurrentTasks),
		tasks.WithIdleTimeout(cfg.Limits.ExecutorIdleTimeout.Duration),
		tasks.WithLogger(o.logger),
		tasks.WithLifecycleObserver(a.hooks),
	}
	if m != nil {
		engineOpts = append(engineOpts, tasks.WithObserver(m))
	}
	if tel.tracing != nil {
		engineOpts = append(engineOpts, tasks.WithTracerProvider(tel.tracing.Provider()))
	}
	if cfg.Store.LeaseTTL != nil {
		engineOpts = append(engineOpts, tasks.WithLeaseTTL(cfg.Store.LeaseTTL.Duration))
	}
	if a.models, err = newModelSkills(cfg, rdb, o.logger, a.isApprover, m); err != nil {
		a.closeStores()
		return nil, err
	}
	engine, err := tasks.NewEngine(ctx, store, newSkillRouter(cfg, tl, a.del, a.models, o.executors), engineOpts...)
	if err != nil {
		a.closeStores()
		return nil, err
	}
	a.engine = engine
	a.handler = a2ahttp.NewCallerHandler(engine, a.checkEnvelope)
	return a, nil
}

// writeStallTimeout is the routes' write stall (a2ahttp.WithWriteStall):
// a2ahttp's default, a variable so that tests can lower it.
var writeStallTimeout = 10 * time.Second

// Handler returns the agent's routes, with the card's URLs under base:
// the card, JSON-RPC and REST (1.0, or 0.3 by A2A-Version), gRPC, health.
func (a *Agent) Handler(base string) (http.Handler, error) {
	now := time.Now()
	jku := strings.TrimSuffix(base, "/") + pathJWKS
	key, err := a.keys.SigningKey(now)
	if err != nil {
		return nil, err
	}
	card, err := agentcard.Sign(buildCard(a.cfg, base), key, jku)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	ext := buildExtendedCard(a.cfg, buildCard(a.cfg, base))
	if ext != nil {
		if ext, err = agentcard.Sign(ext, key, jku); err != nil {
			return nil, fmt.Errorf("sign extended card: %w", err)
		}
	}
	a.extended.Store(ext)
	if digest, err := delegation.CardDigest(card); err == nil {
		a.selfHop.Store(&delegation.Hop{Agent: a.cfg.Name, CardDigest: digest})
	}
	limit := a.cfg.Limits.MaxBodyBytes
	mux := http.NewServeMux()
	body, err := cardJSON(context.Background(), card, a.cfg.Card.compat03())
	if err != nil {
		return nil, err
	}
	jwks, err := a.keys.JWKS(now)
	if err != nil {
		return nil, err
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, staticJSON(body, 5*time.Minute))
	mux.Handle(pathJWKS, staticJSON(jwks, 5*time.Minute))

	// Callers are authenticated on their headers, before any of the body
	// is read: a caller without credentials never holds body memory.
	faceOpts := []a2ahttp.Option{
		a2ahttp.WithMaxBodyBytes(limit),
		a2ahttp.WithBodyReadTimeout(a.cfg.Server.ReadTimeout.Duration),
		a2ahttp.WithInflightBodyBytes(a.cfg.Server.MaxInflightBodyBytes),
		a2ahttp.WithWriteStall(writeStallTimeout),
		a2ahttp.WithLogger(a.log),
	}
	if a.metrics != nil {
		faceOpts = append(faceOpts, a2ahttp.WithObserver(a.metrics))
	}
	face := a2ahttp.New(a.handler, a.authn, faceOpts...)
	if a.metrics != nil && a.cfg.Metrics.Listen == "" {
		mux.Handle("GET /metrics", face.Authenticated(a.metrics.Handler()))
	}
	jsonrpc := face.JSONRPC()
	mux.Handle("POST "+pathJSONRPC, jsonrpc)
	mux.Handle("POST "+pathJSONRPC+"/{$}", jsonrpc) // where a widely used test client posts
	mux.Handle(pathREST+"/", face.REST(pathREST))
	mux.Handle("GET /a2a/push/status", face.Authenticated(http.HandlerFunc(a.pushStatus)))
	mux.Handle("POST /a2a/push/retry", face.Authenticated(http.HandlerFunc(a.pushRetry)))
	mux.Handle("GET /a2a/audit", face.Authenticated(http.HandlerFunc(a.auditList)))
	mux.Handle("GET /a2a/delegations", face.Authenticated(http.HandlerFunc(a.delegationsList)))
	mux.Handle("GET /a2a/ledger", face.Authenticated(http.HandlerFunc(a.ledgerList)))
	a.routeBlobs(mux, base, face)
	a.routeMCP(mux, face)
	a.routeConsole(mux, base, face)
	grpcPath, grpcHandler := a2aconnect.NewHandler(face.Observed("grpc"), connect.WithReadMaxBytes(int(limit)))
	mux.Handle(grpcPath, face.GRPC(grpcHandler))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "ok")
	})
	// Ready means the store answers: with Redis down the agent is alive but
	// cannot serve, and a load balancer should send its callers elsewhere.
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if err := a.store.Ping(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "store: %s (%s)\n", "unavailable", a.cfg.Store.Kind)
			return
		}
		fmt.Fprintf(w, "ok (store %s)\n", a.cfg.Store.Kind)
	})
	if a.tracing != nil {
		return face.Outermost(a.tracing.Handler(mux, "a2a")), nil
	}
	return face.Outermost(mux), nil
}

// Serve answers on ln until ctx ends, then stops taking new messages, lets
// running tasks finish for up to the config's shutdown_grace (failing those
// still running, so their streams get a final event), waits for responses
// to drain, and closes the store. A stop through ctx is not an error.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	defer a.Close()
	base := a.cfg.PublicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	handler, err := a.Handler(base)
	if err != nil {
		return err
	}
	sc := a.cfg.Server
	limited := a2ahttp.LimitConnections(ln, sc.MaxConnections, *sc.MaxConnectionsPerIP, a.log)
	a2ahttp.WarnPerIPBehindProxy(a.log, *sc.MaxConnectionsPerIP, a.cfg.PublicURL)
	ln = limited
	// No WriteTimeout: it would cut SSE streams, which last as long as their
	// task. A2A bodies get a deadline of their own, with a 408 that says so
	// (a2ahttp.WithBodyReadTimeout); ReadTimeout is the backstop for every other route.
	// Idle connections end after IdleTimeout, and the limiter bounds the
	// connections held.
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: sc.ReadHeaderTimeout.Duration,
		ReadTimeout:       sc.ReadHeaderTimeout.Duration + sc.ReadTimeout.Duration,
		IdleTimeout:       sc.IdleTimeout.Duration,
		ConnState:         limited.ConnState,
		ConnContext:       limited.ConnContext,
		Protocols:         new(http.Protocols),
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true) // h2c: gRPC without TLS
	// Streams per HTTP/2 connection: each is a handler goroutine, and the
	// connection cap counts connections, not streams.
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: a2ahttp.MaxStreamsPerConn}
	if c := a.console.Load(); c != nil { // its live pages' streams would hold the drain to its deadline
		srv.RegisterOnShutdown(c.EndStreams)
	}
	if a.tools != nil { // MCP servers run as long as the agent serves
		mcpCtx, stopMCP := context.WithCancel(context.WithoutCancel(ctx))
		mcpDone := make(chan struct{})
		go func() {
			defer close(mcpDone)
			if err := a.tools.manager.Run(mcpCtx); err != nil {
				a.log.Error("mcp manager stopped", slog.Any("error", err))
			}
		}()
		defer func() { stopMCP(); <-mcpDone }()
		go a.warnUnmatchedGlobs(mcpCtx)
	}
	if a.metrics != nil && a.cfg.Metrics.Listen != "" { // until the agent has stopped, so a scrape sees the shutdown
		metricsCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
		waitMetrics, err := a.serveMetrics(metricsCtx)
		if err != nil {
			stopMetrics()
			return err
		}
		defer func() { stopMetrics(); waitMetrics() }()
	}
	pushCtx, stopPush := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPush()
	waitPush := func() {}
	if a.cfg.Capabilities.PushNotifications {
		waitPush = a.startPush(pushCtx, strings.TrimSuffix(base, "/"))
	}
	waitRetention := a.startRetention(pushCtx) // stops with delivery, before the store closes
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	a.log.Info("agent serving", slog.String("name", a.cfg.Name), slog.String("address", ln.Addr().String()),
		slog.String("card", strings.TrimSuffix(base, "/")+a2asrv.WellKnownAgentCardPath))
	select {
	case err := <-served:
		stopPush()
		waitPush()
		waitRetention()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	grace := a.cfg.Limits.ShutdownGrace.Duration
	a.log.Info("agent stopping", slog.Duration("grace", grace))
	stopCtx := context.WithoutCancel(ctx)
	// Streams never go idle: the server's drain gets extra time to deliver
	// the final events the engine writes when the grace ends.
	drainCtx, cancelDrain := context.WithTimeout(stopCtx, grace+5*time.Second)
	defer cancelDrain()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(drainCtx) }()
	taskCtx, cancelTasks := context.WithTimeout(stopCtx, grace)
	defer cancelTasks()
	if err := a.engine.Shutdown(taskCtx); err != nil { // tasks left to resume are no error: the engine logs them
		a.log.Warn("tasks still running at the end of the grace period were failed", slog.Any("error", err))
	}
	if err := <-shut; err != nil {
		srv.Close()
	}
	<-served // http.ErrServerClosed, as expected
	// Delivery stops last: what it has not sent stays queued for the next start.
	stopPush()
	waitPush()
	waitRetention()
	return a.Close()
}

// Close closes the agent's store. Serve calls it; call it yourself only for
// an agent that was never served.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		a.closeStores()
		if a.tracing != nil { // export the spans still buffered
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := a.tracing.Shutdown(ctx); err != nil {
				a.log.Warn("export the last traces", slog.Any("error", err))
			}
		}
	})
	return a.closeErr
}

// closeStores stops the observing hooks and closes every store the agent
// opened, keeping the first error.
func (a *Agent) closeStores() {
	if a.hooks != nil {
		a.hooks.close()
	}
	if err := a.store.Close(); err != nil {
		a.closeErr = fmt.Errorf("close store: %w", err)
	}
	if a.tools != nil {
		if err := a.tools.audit.Close(); err != nil && a.closeErr == nil {
			a.closeErr = fmt.Errorf("close audit log: %w", err)
		}
	}
	if a.del != nil {
		if err := a.del.ledger.Close(); err != nil && a.closeErr == nil {
			a.closeErr = fmt.Errorf("close ledger: %w", err)
		}
	}
	if err := a.models.close(); err != nil && a.closeErr == nil {
		a.closeErr = fmt.Errorf("close executor state: %w", err)
	}
}
