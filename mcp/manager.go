package mcp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// historySize is how many past snapshots stay resolvable by version, so that a call planned
// against a slightly older snapshot still runs when its tool did not change.
const historySize = 32

// ServerState is where a server's supervisor is.
type ServerState string

const (
	// StateConnecting: the first connect has not succeeded yet.
	StateConnecting ServerState = "connecting"
	// StateReady: connected; the server's tools are in the catalog.
	StateReady ServerState = "ready"
	// StateReconnecting: the connection was lost; the tools stay in the catalog while the
	// supervisor reconnects, until WithUnavailableAfter attempts have failed.
	StateReconnecting ServerState = "reconnecting"
	// StateUnavailable: the server stays down; its tools are not in the catalog. The
	// supervisor keeps trying with backoff.
	StateUnavailable ServerState = "unavailable"
	// StateStopped: Run has returned.
	StateStopped ServerState = "stopped"
)

// ServerStatus reports one server's supervisor.
type ServerStatus struct {
	// Name is the server's configured name.
	Name string
	// State is where its supervisor is.
	State ServerState
	// Protocol is the MCP protocol version of the current or last session.
	Protocol string
	// Connects counts successful connects; Listings counts tool listings (one per connect and
	// one per list_changed).
	Connects, Listings int
	// Err is the last connect or listing error, nil after a successful connect.
	Err error
}

// Manager supervises the configured MCP servers, publishes their tools as catalog snapshots
// and runs tool calls. Its methods are safe for concurrent use.
type Manager struct {
	cfg     config
	running atomic.Bool

	mu       sync.Mutex
	sups     map[string]*supervisor // by server name; replaced by Reconfigure
	order    []*supervisor          // config order
	runCtx   context.Context        // Run's ctx, nil before Run; supervisors started later derive from it
	stopping bool                   // Run is waiting for its supervisors: start no more
	wg       sync.WaitGroup         // every supervisor goroutine, for Run to wait on
	current  *Snapshot
	history  map[string]*Snapshot
	versions []string      // history's keys, oldest first
	updated  chan struct{} // closed and replaced on every snapshot or status change

	// progress routes notifications/progress to the call that asked for them: one session
	// serves many calls, so the token is the only way to tell them apart.
	progress  sync.Map // token (string) → *progressRoute
	lastToken atomic.Uint64
}

// NewManager checks the server configs and returns a Manager for them; [Manager.Run] starts
// it. Until then the catalog is empty.
func NewManager(servers []ServerConfig, opts ...ManagerOption) (*Manager, error) {
	m := &Manager{
		cfg:     newManagerConfig(opts),
		sups:    make(map[string]*supervisor, len(servers)),
		history: make(map[string]*Snapshot),
		updated: make(chan struct{}),
	}
	if err := CheckServers(servers); err != nil {
		return nil, err
	}
	for _, sc := range servers {
		s := newSupervisor(m, sc)
		m.sups[sc.Name] = s
		m.order = append(m.order, s)
	}
	m.publishLocked()
	return m, nil
}

// CheckServers reports every problem with a set of server configs at once, as [NewManager]
// and [Manager.Reconfigure] would, without changing anything.
func CheckServers(servers []ServerConfig) error {
	var errs []error
	seen := make(map[string]bool, len(servers))
	for _, sc := range servers {
		if err := sc.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[sc.Name] {
			errs = append(errs, fmt.Errorf("mcp server %q: configured twice", sc.Name))
		}
		seen[sc.Name] = true
	}
	return errors.Join(errs...)
}

// Run supervises every server until ctx is done, then closes their sessions, kills the stdio
// servers' process groups and returns. Cancellation is a clean stop, so the error is nil; Run
// may be called once.
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("mcp: Manager.Run called twice")
	}
	m.mu.Lock()
	m.runCtx = ctx
	for _, s := range m.order {
		m.startLocked(s)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.stopping = true // no Reconfigure starts a supervisor after this: Wait may begin
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// startLocked runs a supervisor until Run's ctx ends or the supervisor is stopped.
func (m *Manager) startLocked(s *supervisor) {
	ctx, cancel := context.WithCancel(m.runCtx)
	s.cancel = cancel
	m.wg.Go(func() {
		defer close(s.done)
		defer cancel()
		s.run(ctx)
	})
}

// Reconfigure replaces the set of servers, as a config reload does. A server whose config
// is unchanged keeps its supervisor and session; a new one is started; a removed one is
// stopped (its session closed, its process group killed) and its tools leave the catalog;
// a changed one is stopped and started afresh. The catalog is republished at once, so a
// call planned against a removed or changed server's tools answers [OutcomeUnavailableTool];
// a call in flight on a stopped server ends as if the server had gone away. Configs with
// any problem are refused whole, and nothing changes. Reconfigure returns once the stopped
// supervisors have ended.
func (m *Manager) Reconfigure(servers []ServerConfig) error {
	if err := CheckServers(servers); err != nil {
		return err
	}
	m.mu.Lock()
	keep := make(map[string]*supervisor, len(servers))
	order := make([]*supervisor, 0, len(servers))
	var started []*supervisor
	for _, sc := range servers {
		s, ok := m.sups[sc.Name]
		if !ok || !reflect.DeepEqual(s.cfg, sc) {
			s = newSupervisor(m, sc)
			started = append(started, s)
		}
		keep[sc.Name] = s
		order = append(order, s)
	}
	var stopped []*supervisor
	for _, s := range m.order {
		if keep[s.cfg.Name] != s {
			stopped = append(stopped, s)
		}
	}
	m.sups, m.order = keep, order
	if m.runCtx != nil && !m.stopping {
		for _, s := range started {
			m.startLocked(s)
		}
	}
	m.publishLocked()
	m.mu.Unlock()

	for _, s := range stopped {
		_, replaced := keep[s.cfg.Name]
		m.cfg.logger.Info("mcp server stopped by a reconfigure", "server", s.cfg.Name, "replaced", replaced)
		if s.cancel != nil {
			s.cancel()
			<-s.done
		}
	}
	for _, s := range started {
		m.cfg.logger.Info("mcp server started by a reconfigure", "server", s.cfg.Name)
	}
	return nil
}

// supervisor returns the named server's supervisor, nil if it is not configured (any more).
func (m *Manager) supervisor(name string) *supervisor {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sups[name]
}

// Snapshot returns the current catalog.
func (m *Manager) Snapshot() *Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current
}

// Updated returns a channel that is closed at the next change of the catalog or of any
// server's status. Take the channel before reading the state it guards, then wait on it.
func (m *Manager) Updated() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.updated
}

// Servers reports every server's supervisor, in config order.
func (m *Manager) Servers() []ServerStatus {
	m.mu.Lock()
	order := m.order
	m.mu.Unlock()
	out := make([]ServerStatus, 0, len(order))
	for _, s := range order {
		out = append(out, s.status())
	}
	return out
}

// snapshotAt returns the snapshot with the version, if it is still in the history.
func (m *Manager) snapshotAt(version string) (*Snapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.history[version]
	return s, ok
}

// changed rebuilds the catalog from the supervisors and wakes every waiter.
func (m *Manager) changed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.publishLocked()
}

func (m *Manager) publishLocked() {
	var tools []*Tool
	for _, s := range m.order {
		tools = append(tools, s.catalogTools()...)
	}
	snap := newSnapshot(tools)
	if m.current == nil || snap.Version != m.current.Version {
		if old, ok := m.history[snap.Version]; ok {
			snap = old // the same tools again (a reconnect): keep the compiled schemas
		} else {
			m.history[snap.Version] = snap
			m.versions = append(m.versions, snap.Version)
			if len(m.versions) > historySize {
				delete(m.history, m.versions[0])
				m.versions = m.versions[1:]
			}
			m.cfg.logger.Info("mcp catalog changed", "version", snap.Version, "tools", len(snap.Tools))
		}
		m.current = snap
	}
	close(m.updated)
	m.updated = make(chan struct{})
}

// supervisor owns one server's connection: connect, list, watch, reconnect.
type supervisor struct {
	m      *Manager
	cfg    ServerConfig
	client *mcpsdk.Client
	relist chan struct{}      // a list_changed arrived; buffered, so one pending relist covers many
	cancel context.CancelFunc // stops run; set under m.mu when started, nil until then
	done   chan struct{}      // closed when run has returned

	mu       sync.Mutex // guards the fields below; never held while calling m.changed
	state    ServerState
	sess     *mcpsdk.ClientSession
	tools    []*Tool
	protocol string
	connects int
	listings int
	err      error
}

func newSupervisor(m *Manager, cfg ServerConfig) *supervisor {
	s := &supervisor{m: m, cfg: cfg, relist: make(chan struct{}, 1), done: make(chan struct{}), state: StateConnecting}
	s.client = mcpsdk.NewClient(&mcpsdk.Implementation{Name: "handoff", Version: "0"}, &mcpsdk.ClientOptions{
		// An empty, non-nil set: the SDK would otherwise advertise roots, which we do not serve.
		Capabilities: &mcpsdk.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, req *mcpsdk.ProgressNotificationClientRequest) {
			m.deliverProgress(req.Params)
		},
		ToolListChangedHandler: func(context.Context, *mcpsdk.ToolListChangedRequest) {
			select { // runs on the session's reader: never block it
			case s.relist <- struct{}{}:
			default:
			}
		},
	})
	return s
}

func (s *supervisor) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ServerStatus{Name: s.cfg.Name, State: s.state, Protocol: s.protocol,
		Connects: s.connects, Listings: s.listings, Err: s.err}
}

// catalogTools is what the server contributes to the catalog: nothing while unavailable.
func (s *supervisor) catalogTools() []*Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateUnavailable || s.state == StateStopped {
		return nil
	}
	return s.tools
}

// update changes the supervisor's fields under its lock, then republishes the catalog.
func (s *supervisor) update(f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
	s.m.changed()
}

// stableAfter is how long a session must live for its loss to count as a fresh failure rather
// than one more in a crash loop.
const stableAfter = 30 * time.Second

// run connects, serves and reconnects until ctx is done.
func (s *supervisor) run(ctx context.Context) {
	defer s.update(func() { s.state, s.sess = StateStopped, nil })
	var (
		failures int  // connect attempts failed in a row: decides unavailability
		attempt  int  // drives the backoff; reset only by a stable session
		pin      bool // speak 2025-11-25 straight away; once pinned, pinned until the Manager restarts
	)
	for ctx.Err() == nil {
		sess, tools, err := s.connect(ctx, pin)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			attempt++
			// A newest-protocol attempt that failed may have failed on server/discover
			// itself; the next attempt speaks 2025-11-25 straight away.
			pin = true
			s.m.cfg.logger.Warn("mcp connect failed", "server", s.cfg.Name, "attempt", failures, "error", err)
			s.update(func() {
				s.err = err
				switch {
				case failures >= s.m.cfg.unavailableAfter:
					s.state = StateUnavailable
				case s.state == StateReady:
					s.state = StateReconnecting
				}
			})
			if !sleepCtx(ctx, s.backoff(attempt)) {
				return
			}
			continue
		}
		failures = 0
		pin = sess.InitializeResult().ProtocolVersion < protocolNewest
		began := time.Now()
		s.serve(ctx, sess, tools)
		if time.Since(began) >= stableAfter {
			attempt = 0
		}
		if ctx.Err() == nil && attempt > 0 && !sleepCtx(ctx, s.backoff(attempt)) {
			return
		}
		attempt++
	}
}

// Protocol versions the supervisor names: the SDK first tries protocolNewest (server/discover)
// and falls back; protocolPinned is what servers that do not speak it are pinned to.
const (
	protocolNewest = "2026-07-28"
	protocolPinned = "2025-11-25"
)

// backoff is the delay before reconnect attempt n (n ≥ 1): min·2ⁿ⁻¹ capped at max, with up
// to 20% jitter so that servers restarted together do not reconnect in lockstep.
func (s *supervisor) backoff(n int) time.Duration {
	d := s.m.cfg.minBackoff
	for i := 1; i < n && d < s.m.cfg.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.m.cfg.maxBackoff)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// sleepCtx waits d, or less if ctx ends first, and reports whether the wait ran out.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connect starts a session and lists its tools, all within the connect timeout.
func (s *supervisor) connect(ctx context.Context, pin bool) (*mcpsdk.ClientSession, []*Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.connectTimeout())
	defer cancel()
	tr, err := s.transport()
	if err != nil {
		return nil, nil, err
	}
	select { // a list_changed from an earlier session is moot: we list afresh
	case <-s.relist:
	default:
	}
	var opts *mcpsdk.ClientSessionOptions
	if pin {
		opts = &mcpsdk.ClientSessionOptions{ProtocolVersion: protocolPinned}
	}
	sess, err := s.client.Connect(ctx, tr, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", s.cfg.Name, err)
	}
	tools, err := s.list(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, nil, err
	}
	return sess, tools, nil
}

// maxTools bounds one server's listing, so that a server paging forever cannot exhaust memory.
const maxTools = 10_000

// list reads every page of the server's tools and keeps those the filters allow.
func (s *supervisor) list(ctx context.Context, sess *mcpsdk.ClientSession) ([]*Tool, error) {
	var tools []*Tool
	var prev map[string]*Tool // unchanged tools keep their compiled schemas
	if snap := s.m.Snapshot(); snap != nil {
		prev = snap.byName
	}
	seen := 0
	for def, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools of %s: %w", s.cfg.Name, err)
		}
		if seen++; seen > maxTools {
			return nil, fmt.Errorf("list tools of %s: more than %d tools", s.cfg.Name, maxTools)
		}
		if !s.cfg.allows(def.Name) {
			continue
		}
		t, err := reuseOrNewTool(s.cfg.Name, def, prev)
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	s.mu.Lock()
	s.listings++
	s.mu.Unlock()
	return tools, nil
}

// serve publishes a connected session and keeps its tools current until the session ends or
// ctx is done; either way the session is closed when serve returns.
func (s *supervisor) serve(ctx context.Context, sess *mcpsdk.ClientSession, tools []*Tool) {
	protocol := sess.InitializeResult().ProtocolVersion
	s.m.cfg.logger.Info("mcp server connected", "server", s.cfg.Name, "protocol", protocol, "tools", len(tools))
	s.update(func() {
		s.state, s.sess, s.tools, s.protocol, s.err = StateReady, sess, tools, protocol, nil
		s.connects++
	})
	lost := make(chan struct{})
	go func() {
		_ = sess.Wait()
		close(lost)
	}()
	defer func() {
		_ = sess.Close()
		<-lost
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lost:
			s.m.cfg.logger.Warn("mcp server connection lost", "server", s.cfg.Name)
			s.update(func() { s.state, s.sess = StateReconnecting, nil })
			return
		case <-s.relist:
			lctx, cancel := context.WithTimeout(ctx, s.cfg.connectTimeout())
			tools, err := s.list(lctx, sess)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// A server that cannot list its tools cannot be trusted with calls either.
				s.m.cfg.logger.Warn("mcp relist failed", "server", s.cfg.Name, "error", err)
				s.update(func() { s.state, s.sess, s.err = StateReconnecting, nil, err })
				return
			}
			s.update(func() { s.tools = tools })
		}
	}
}

// session returns the live session, waiting within ctx while the server reconnects. It never
// returns dead, the session a call just lost: the supervisor may not have noticed the loss yet.
func (s *supervisor) session(ctx context.Context, dead *mcpsdk.ClientSession) (*mcpsdk.ClientSession, error) {
	for {
		updated := s.m.Updated()
		s.mu.Lock()
		sess, state := s.sess, s.state
		s.mu.Unlock()
		if sess != nil && sess != dead {
			return sess, nil
		}
		if state == StateUnavailable || state == StateStopped {
			return nil, errServerDown
		}
		select {
		case <-updated:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// broken drops a session a call found dead (an HTTP session the server forgot) so that the
// supervisor reconnects, rather than waiting for a transport that may never notice.
func (s *supervisor) broken(sess *mcpsdk.ClientSession) {
	s.mu.Lock()
	live := s.sess == sess
	s.mu.Unlock()
	if live {
		go func() { _ = sess.Close() }() // closing a stdio session waits for the process
	}
}

// requestRelist asks for a fresh listing, when a server disowns a tool its listing offered.
func (s *supervisor) requestRelist() {
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// progressRoute is one call's progress callback, closed when the call ends.
type progressRoute struct {
	mu     sync.Mutex // held while f runs, so that closing waits for a running f
	f      func(progress, total float64, message string)
	closed bool
}

// routeProgress registers f under a fresh progress token; stop unregisters it and returns only
// once no f is running, so that f is never called after the call has returned.
func (m *Manager) routeProgress(f func(progress, total float64, message string)) (token string, stop func()) {
	// A string token: it comes back exactly as sent, where a number would come back a float64.
	token = "handoff-" + strconv.FormatUint(m.lastToken.Add(1), 10)
	r := &progressRoute{f: f}
	m.progress.Store(token, r)
	return token, func() {
		m.progress.Delete(token)
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
	}
}

// deliverProgress passes a notifications/progress to the call whose token it carries. The SDK
// handles one session's notifications one at a time, in order, so each call's callback sees
// them in the order the server sent them. Unknown tokens (a call that has ended, a server that
// made one up) are dropped.
func (m *Manager) deliverProgress(p *mcpsdk.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := m.progress.Load(token)
	if !ok {
		return
	}
	r := v.(*progressRoute)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.f(p.Progress, p.Total, p.Message)
	}
}

// transport builds a fresh transport for one connect attempt.
func (s *supervisor) transport() (mcpsdk.Transport, error) {
	if dial, ok := s.m.cfg.dial[s.cfg.Name]; ok {
		return dial()
	}
	switch s.cfg.Transport {
	case TransportStdio:
		env, err := s.cfg.environ(s.m.cfg.lookupEnv)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", s.cfg.Name, err)
		}
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env, cmd.Dir = env, s.cfg.Dir
		return &groupTransport{cmd: cmd}, nil
	default:
		header := make(http.Header, len(s.cfg.Headers))
		for k, raw := range s.cfg.Headers {
			v, err := expand(raw, s.m.cfg.lookupEnv)
			if err != nil {
				return nil, fmt.Errorf("server %s: header %s: %w", s.cfg.Name, k, err)
			}
			header.Set(k, v)
		}
		hc := *s.m.cfg.httpClient
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc.Transport = headerTransport{header: header, base: base}
		return &mcpsdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &hc}, nil
	}
}

// headerTransport adds the configured headers to every request of an http server's session.
type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.header) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.header {
			r.Header[k] = v
		}
	}
	return h.base.RoundTrip(r)
}
