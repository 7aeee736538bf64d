package mcp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// TaskHookEvent is what a task_created or task_finished hook is told of a task.
type TaskHookEvent struct {
	// Point is task_created or task_finished.
	Point HookPoint `json:"point"`
	// Hook is the hook's own name.
	Hook string `json:"hook"`
	// TaskID is the task.
	TaskID string `json:"task_id"`
	// ContextID is the task's context.
	ContextID string `json:"context_id"`
	// Principal is the caller that owns the task.
	Principal string `json:"principal"`
	// Tenant is the tenant the task was created under, if any.
	Tenant string `json:"tenant,omitempty"`
	// Skill is the skill the task runs.
	Skill string `json:"skill,omitempty"`
	// State is, for task_created, the state the task was created in; for task_finished,
	// its final state.
	State string `json:"state"`
	// Status, for task_finished, is the text of the final status message, if any.
	Status string `json:"status,omitempty"`
	// Time is when the write was stored, in UTC.
	Time time.Time `json:"time"`
}

// GateHookEvent is what a gate_decided hook is told of a delegation's end.
type GateHookEvent struct {
	// Point is gate_decided.
	Point HookPoint `json:"point"`
	// Hook is the hook's own name.
	Hook string `json:"hook"`
	// DelegationID is the delegation: the local task's id, or TASK#SKILL-N for one of a Go
	// executor's delegations.
	DelegationID string `json:"delegation_id"`
	// TaskID is the local task that delegated.
	TaskID string `json:"task_id"`
	// Skill is the local skill that delegated.
	Skill string `json:"skill"`
	// Peer is the peer's name in the config.
	Peer string `json:"peer"`
	// RemoteTaskID is the peer's task, if it answered.
	RemoteTaskID string `json:"remote_task_id,omitempty"`
	// Outcome is the gate's decision (committed, rejected, unknown), or failed when the
	// delegation failed before the gate could decide.
	Outcome string `json:"outcome"`
	// Reason says why a delegation that did not commit ended as it did.
	Reason string `json:"reason,omitempty"`
	// Checks are the gate's checks, each with its result; none for a delegation that failed
	// before the gate decided.
	Checks []HookCheck `json:"checks"`
	// Time is when the decision was recorded, in UTC.
	Time time.Time `json:"time"`
}

// HookCheck is one of the gate's checks in a [GateHookEvent].
type HookCheck struct {
	// Name says what was checked ("artifact NAME", "verifier NAME", ...).
	Name string `json:"name"`
	// Passed is true when the check held.
	Passed bool `json:"passed"`
	// Reason says why it did not.
	Reason string `json:"reason,omitempty"`
}

// An ObservedEvent is what [Observers.Notify] takes: a [TaskHookEvent] or a [GateHookEvent].
type ObservedEvent interface {
	hookPoint() HookPoint
	// forHook is the event as the named hook is told it.
	forHook(name string) any
	// subject names the task or delegation in a log line.
	subject() string
}

func (e TaskHookEvent) hookPoint() HookPoint { return e.Point }
func (e TaskHookEvent) subject() string      { return e.TaskID }
func (e TaskHookEvent) forHook(name string) any {
	e.Hook = name
	return e
}

func (e GateHookEvent) hookPoint() HookPoint { return HookGateDecided }
func (e GateHookEvent) subject() string      { return e.DelegationID }
func (e GateHookEvent) forHook(name string) any {
	e.Point, e.Hook = HookGateDecided, name
	if e.Checks == nil {
		e.Checks = []HookCheck{}
	}
	return e
}

// ObserversConfig is what [NewObservers] needs besides the hooks.
type ObserversConfig struct {
	// Client POSTs the http hooks' events; required when one is configured (the agent
	// gives its push SSRF guard's client).
	Client *http.Client
	// LookupEnv is where a command hook's PATH, InheritEnv and ${VAR} are read from; nil
	// means [os.LookupEnv].
	LookupEnv LookupEnv
	// Logger hears of each hook that failed and each event dropped; nil discards.
	Logger *slog.Logger
	// Queue bounds the events waiting for their hooks; zero means 1024.
	Queue int
}

// Observers runs the observing hooks outside a tool call's road: task_created,
// task_finished and gate_decided. [Observers.Notify] queues an event and returns at once,
// so that neither the engine's writer nor a delegation ever waits for a hook; one goroutine
// runs the queued events in the order they came, and for each the hooks of its point in
// their configured order, each to its end or its timeout before the next. A hook that
// fails (times out, exits non-zero, cannot start, answers HTTP other than 2xx) is logged
// and changes nothing: observers fail open, and their answers are ignored. When the queue
// is full a new event is dropped with a log line: an observer may miss events under a
// flood, a task never waits for one.
type Observers struct {
	cfg   ObserversConfig
	set   atomic.Pointer[observerSet]
	queue chan queuedEvent
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// observerSet is one configuration's hooks by point; an event runs under the set in force
// when it was queued.
type observerSet struct {
	byPoint map[HookPoint][]Hook
	runner  *hookRunner
}

type queuedEvent struct {
	set *observerSet
	ev  ObservedEvent
}

// NewObservers checks hooks (each at one of the observer points) and starts the goroutine
// that runs them; [Observers.Close] stops it.
func NewObservers(hooks []Hook, cfg ObserversConfig) (*Observers, error) {
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1024
	}
	o := &Observers{cfg: cfg, queue: make(chan queuedEvent, cfg.Queue), stop: make(chan struct{}), done: make(chan struct{})}
	if err := o.Reconfigure(hooks); err != nil {
		return nil, err
	}
	go o.loop()
	return o, nil
}

// Reconfigure replaces the hooks; events already queued run under the old ones. Hooks that
// do not check leave the old ones in force, and the error says why.
func (o *Observers) Reconfigure(hooks []Hook) error {
	if err := errors.Join(checkHooks(hooks, o.cfg.Client, observerPoints)...); err != nil {
		return err
	}
	set := &observerSet{byPoint: map[HookPoint][]Hook{},
		runner: &hookRunner{client: o.cfg.Client, lookupEnv: o.cfg.LookupEnv, logger: o.cfg.Logger}}
	for _, h := range hooks {
		set.byPoint[h.Point] = append(set.byPoint[h.Point], h)
	}
	o.set.Store(set)
	return nil
}

// Wants reports whether any hook runs at point, so that a caller may skip making an event
// nobody is told.
func (o *Observers) Wants(point HookPoint) bool { return len(o.set.Load().byPoint[point]) > 0 }

// Notify queues ev for the hooks of its point, if there are any, and returns at once. It
// is safe for concurrent use; after Close it does nothing.
func (o *Observers) Notify(ev ObservedEvent) {
	set := o.set.Load()
	if len(set.byPoint[ev.hookPoint()]) == 0 {
		return
	}
	select {
	case <-o.stop:
		return
	default:
	}
	select {
	case o.queue <- queuedEvent{set, ev}:
	default:
		o.cfg.Logger.Warn("observing hooks' queue is full: event dropped", slog.String("point", string(ev.hookPoint())),
			slog.String("id", ev.subject()), slog.Int("queue", cap(o.queue)))
	}
}

func (o *Observers) loop() {
	defer close(o.done)
	for {
		select {
		case q := <-o.queue:
			o.run(q)
		case <-o.stop:
			if n := len(o.queue); n > 0 {
				o.cfg.Logger.Warn("observing hooks stopped: queued events dropped", slog.Int("events", n))
			}
			return
		}
	}
}

// run runs the hooks of q's point on its event, in order; a failure is logged.
func (o *Observers) run(q queuedEvent) {
	point := q.ev.hookPoint()
	for _, h := range q.set.byPoint[point] {
		if _, err := q.set.runner.run(context.Background(), h, q.ev.forHook(h.Name)); err != nil {
			o.cfg.Logger.Warn("observing hook failed", slog.String("hook", h.Name), slog.String("point", string(point)),
				slog.String("id", q.ev.subject()), slog.Any("error", err))
		}
	}
}

// Close stops running hooks: it waits for the one running (bounded by its timeout) and
// drops the events still queued, with a log line.
func (o *Observers) Close() {
	o.once.Do(func() { close(o.stop) })
	<-o.done
}
