package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/push/webhook"
	"github.com/handoff-a2a/handoff/tasks"
)

// DeliveryStore is what the dispatcher needs of the task store (both task
// stores implement it): the configs with their delivery state, and the
// tasks' event logs. The delivery state is kept beside the task it follows,
// in the same store, so that a config written with a task's first event is
// durable with it.
type DeliveryStore interface {
	PushDeliveries(ctx context.Context, task a2a.TaskID) ([]*tasks.PushDelivery, error)
	UpdatePushDelivery(ctx context.Context, d *tasks.PushDelivery) error
	Events(ctx context.Context, owner tasks.Owner, id a2a.TaskID, after uint64) ([]tasks.Event, error)
}

// Dispatcher delivers every event of a task's durable log to each push
// config of the task, in order, one worker per config: a slow or dead
// webhook holds up only its own deliveries, never the task or other
// webhooks. Where each config stands is stored after every failed attempt,
// and after successful ones in batches (see [CursorBatch]), so a restart
// resumes where it stopped, and an event is delivered at least once.
type Dispatcher struct {
	store  DeliveryStore
	signer *Signer
	client *http.Client
	cfg    dispatchConfig

	mu      sync.Mutex
	ctx     context.Context // set by Run
	workers map[string]*worker
	// watched are the tasks that have push configs: Notify ignores every
	// other task without touching the store, as most tasks have none.
	watched map[a2a.TaskID]struct{}
	wg      sync.WaitGroup

	// With a store that replicas share, jobs come from its queue (queue.go).
	queue  sharedQueue
	shared *sharedState
}

type worker struct {
	task   a2a.TaskID
	config string
	nudged bool // there may be more to deliver; guarded by Dispatcher.mu
	reload bool // the stored state changed (a retry was asked for); guarded by Dispatcher.mu
	wake   chan struct{}

	// Only the worker's goroutine touches these: the config's state as last
	// stored, and events read from the log but not yet delivered.
	pd    *tasks.PushDelivery
	queue []tasks.Event
	// unstored counts the deliveries pd has advanced over since it was last
	// stored; storeBy is when the first of them must be stored at the latest.
	unstored int
	storeBy  time.Time
}

// CursorBatch and CursorWindow bound the deliveries a crash may send again:
// a worker stores where its config stands after at most CursorBatch
// successful deliveries, or with the first delivery made CursorWindow after
// the oldest one unstored, and whenever it has caught up with the log, fails
// or stops. One store write per delivery would bound a webhook's rate by the
// store's commit latency.
const (
	CursorBatch  = 64
	CursorWindow = 250 * time.Millisecond
)

// NewDispatcher returns a dispatcher that signs deliveries with signer and
// posts them with client (the SSRF guard's client).
func NewDispatcher(store DeliveryStore, signer *Signer, client *http.Client, opts ...DispatcherOption) *Dispatcher {
	d := &Dispatcher{store: store, signer: signer, client: client, cfg: newDispatchConfig(opts), workers: map[string]*worker{}, watched: map[a2a.TaskID]struct{}{}}
	if q, ok := store.(sharedQueue); ok {
		d.queue, d.shared = q, newSharedState()
	}
	return d
}

// Run delivers until ctx ends: first whatever was left pending by a previous
// process, then what Notify announces. It returns after its workers stopped.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	if d.queue != nil {
		return d.runShared(ctx)
	}
	all, err := d.store.PushDeliveries(ctx, "")
	if err != nil {
		return fmt.Errorf("push: resume deliveries: %w", err)
	}
	for _, pd := range all {
		d.Watch(pd.Config.TaskID)
		d.nudge(pd.Config.TaskID, pd.Config.ID)
	}
	<-ctx.Done()
	d.drain()
	return nil
}

// Watch tells the dispatcher that task has a push config (one was just
// stored): from now on its events are delivered.
func (d *Dispatcher) Watch(task a2a.TaskID) {
	d.mu.Lock()
	d.watched[task] = struct{}{}
	d.mu.Unlock()
}

// Notify tells the dispatcher that task has new events. It does not block,
// and costs nothing for a task that has no push config.
func (d *Dispatcher) Notify(task a2a.TaskID) {
	d.mu.Lock()
	ctx := d.ctx
	_, watched := d.watched[task]
	d.mu.Unlock()
	if d.queue != nil && ctx != nil && ctx.Err() == nil {
		go d.enqueue(ctx, task) // whichever replica takes the job delivers
		return
	}
	if !watched || ctx == nil || ctx.Err() != nil {
		return // not running: Run's scan will find what is pending
	}
	go func() {
		pds, err := d.store.PushDeliveries(ctx, task)
		if err != nil {
			d.cfg.logger.Error("push: read configs", slog.String("task_id", string(task)), slog.Any("error", err))
			return
		}
		if len(pds) == 0 { // its configs were deleted
			d.mu.Lock()
			delete(d.watched, task)
			d.mu.Unlock()
		}
		for _, pd := range pds {
			d.nudge(task, pd.Config.ID)
		}
	}()
}

// drain waits for the workers once ctx has ended. Workers are added under
// mu after a check that ctx has not ended, so taking mu first orders every
// Add before the Wait (a worker added concurrently with the Wait could
// outlive Run).
func (d *Dispatcher) drain() {
	d.mu.Lock() // an empty critical section: a barrier, not a guard
	d.mu.Unlock()
	d.wg.Wait()
}

// nudge makes sure a worker runs for the config and looks again.
func (d *Dispatcher) nudge(task a2a.TaskID, config string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nudgeLocked(task, config)
}

func (d *Dispatcher) nudgeLocked(task a2a.TaskID, config string) {
	key := string(task) + "\x00" + config
	if d.ctx == nil || d.ctx.Err() != nil {
		return
	}
	if w := d.workers[key]; w != nil {
		w.nudged = true
		select {
		case w.wake <- struct{}{}:
		default:
		}
		return
	}
	w := &worker{task: task, config: config, wake: make(chan struct{}, 1)}
	d.workers[key] = w
	if d.shared != nil {
		d.shared.active[task]++
	}
	d.wg.Add(1)
	go d.work(d.ctx, key, w)
}

// done retires a worker that found nothing to deliver, unless it was
// nudged meanwhile.
func (d *Dispatcher) done(key string, w *worker) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.nudged {
		w.nudged = false
		return false
	}
	delete(d.workers, key)
	if d.shared != nil {
		d.retiredLocked(w.task)
	}
	return true
}

func (d *Dispatcher) work(ctx context.Context, key string, w *worker) {
	defer d.wg.Done()
	defer d.storeOnStop(ctx, w)
	for ctx.Err() == nil {
		d.mu.Lock()
		reload := w.reload
		w.reload = false
		d.mu.Unlock()
		if reload { // read the state again: a request to retry is in it
			if err := d.storeCursor(ctx, w); err != nil && !errGone(err) && ctx.Err() == nil {
				d.cfg.logger.Error("push: delivery", slog.String("task_id", string(w.task)), slog.String("config", w.config), slog.Any("error", err))
			}
			w.pd, w.queue, w.unstored = nil, nil, 0 // unstored, they are sent again
		}
		more, wait, err := d.step(ctx, w)
		if err != nil && ctx.Err() != nil {
			return // stopping: the state stored so far is where the next start resumes
		}
		if err != nil {
			d.cfg.logger.Error("push: delivery", slog.String("task_id", string(w.task)), slog.String("config", w.config), slog.Any("error", err))
			wait = d.cfg.baseDelay
		}
		if more && wait == 0 {
			continue
		}
		if !more && err == nil {
			if d.done(key, w) {
				return
			}
			continue
		}
		// A wake-up ends the wait early: it may be a request to retry now.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-w.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// step delivers (or retries) the next event of one config. more says
// whether there is more to do, wait how long to wait before it.
func (d *Dispatcher) step(ctx context.Context, w *worker) (more bool, wait time.Duration, err error) {
	if w.pd == nil { // the state is read once, then kept as the worker stores it
		pds, err := d.store.PushDeliveries(ctx, w.task)
		if err != nil {
			return true, 0, err
		}
		for _, p := range pds {
			if p.Config.ID == w.config {
				w.pd = p
			}
		}
		if w.pd == nil {
			return false, 0, nil // the config was deleted
		}
	}
	if len(w.pd.Retries) > 0 {
		if err := d.takeRetries(ctx, w); err != nil {
			w.pd, w.queue = nil, nil // start again from what is stored
			if errGone(err) {
				return false, 0, nil
			}
			return true, 0, fmt.Errorf("retry: %w", err)
		}
	}
	pd := w.pd
	if now := d.cfg.now(); pd.NextAttempt.After(now) {
		return true, pd.NextAttempt.Sub(now), nil
	}
	if len(w.queue) == 0 {
		evs, err := d.store.Events(ctx, pd.Owner, w.task, pd.Delivered)
		if err != nil {
			return true, 0, err
		}
		w.queue = evs
	}
	evs := w.queue
	if len(evs) == 0 {
		w.pd = nil // read again when woken: the config may have changed
		return false, 0, nil
	}
	ev := evs[0]
	body, err := json.Marshal(a2a.StreamResponse{Event: ev.Event})
	if err != nil {
		return true, 0, fmt.Errorf("encode event %d: %w", ev.Seq, err)
	}
	now := d.cfg.now()
	attempts, first := pd.Attempts, pd.FirstAttempt
	if pd.Attempts == 0 {
		pd.FirstAttempt = now
	}
	pd.Attempts++
	retryAfter, reason, detail, retriable := d.post(ctx, pd, ev.Seq, body)
	if reason != "" && ctx.Err() != nil {
		// Cut short by the dispatcher stopping: not an attempt that failed.
		// It is not stored, and the next start sends the event again.
		pd.Attempts, pd.FirstAttempt = attempts, first
		return true, 0, fmt.Errorf("deliver event %d: %w", ev.Seq, ctx.Err())
	}
	dead := reason != "" && (!retriable || pd.Attempts >= d.cfg.maxAttempts || now.Sub(pd.FirstAttempt) >= d.cfg.maxAge)
	if o := d.cfg.observer; o != nil {
		observeAttempt(o, ev.Event, reason == "", dead, d.cfg.now().Sub(now), d.cfg.now())
	}
	if reason != "" {
		d.cfg.logger.Info("push: delivery attempt failed", slog.String("task_id", string(w.task)), slog.String("config", w.config),
			slog.Uint64("seq", ev.Seq), slog.Int("attempt", pd.Attempts), slog.String("error", detail))
	}
	switch {
	case reason == "":
		w.queue = w.queue[1:]
		pd.Delivered, pd.DeliveredCount = ev.Seq, pd.DeliveredCount+1
		pd.Attempts, pd.FirstAttempt, pd.NextAttempt, pd.LastError = 0, time.Time{}, time.Time{}, ""
	case dead:
		d.cfg.logger.Warn("push: delivery dead-lettered", slog.String("task_id", string(w.task)), slog.String("config", w.config),
			slog.Uint64("seq", ev.Seq), slog.Int("attempts", pd.Attempts), slog.String("reason", reason), slog.String("error", detail))
		pd.Dead = append(pd.Dead, tasks.DeadDelivery{Seq: ev.Seq, Attempts: pd.Attempts, Reason: reason, At: now})
		w.queue = w.queue[1:]
		pd.Delivered = ev.Seq
		pd.Attempts, pd.FirstAttempt, pd.NextAttempt, pd.LastError = 0, time.Time{}, time.Time{}, ""
	default:
		delay := d.backoff(pd.Attempts)
		if retryAfter > delay {
			delay = min(retryAfter, d.cfg.maxDelay)
		}
		pd.NextAttempt, pd.LastError = now.Add(delay), reason
	}
	if reason == "" {
		if w.unstored == 0 {
			w.storeBy = now.Add(CursorWindow)
		}
		w.unstored++
		if w.unstored < CursorBatch && now.Before(w.storeBy) && len(w.queue) > 0 {
			return true, 0, nil // stored with a later delivery: see CursorBatch
		}
	}
	if err := d.storeCursor(ctx, w); err != nil {
		w.pd, w.queue, w.unstored = nil, nil, 0 // start again from what is stored: those deliveries are sent again
		if errGone(err) {
			return false, 0, nil
		}
		return true, 0, err
	}
	if !pd.NextAttempt.IsZero() {
		return true, pd.NextAttempt.Sub(now), nil
	}
	return true, 0, nil
}

// storeCursor stores the worker's state: where its config stands.
func (d *Dispatcher) storeCursor(ctx context.Context, w *worker) error {
	if w.pd == nil {
		return nil
	}
	if err := d.store.UpdatePushDelivery(ctx, w.pd); err != nil {
		return err
	}
	w.unstored = 0
	return nil
}

// storeOnStop stores the deliveries a stopping worker made since its last
// write, so that a clean stop sends none of them again.
func (d *Dispatcher) storeOnStop(ctx context.Context, w *worker) {
	if w.unstored == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := d.storeCursor(sctx, w); err != nil && !errGone(err) {
		d.cfg.logger.Warn("push: store deliveries on stop: they will be sent again", slog.String("task_id", string(w.task)),
			slog.String("config", w.config), slog.Int("deliveries", w.unstored), slog.Any("error", err))
	}
}

// backoff is the delay before attempt n+1: doubling from the base, capped,
// with full jitter over its upper half so retries of many webhooks spread.
func (d *Dispatcher) backoff(n int) time.Duration {
	delay := d.cfg.baseDelay << min(n-1, 20)
	if delay <= 0 || delay > d.cfg.maxDelay {
		delay = d.cfg.maxDelay
	}
	return delay/2 + rand.N(delay/2+1)
}

// ReasonFailed is the reason the push config's owner is shown (in the push
// status: the last error, dead letters) for a delivery that got no HTTP
// answer, whatever the cause: a refused or reset connection, a timeout, a
// TLS failure or a lookup would each tell what a port of the target is
// doing, and a config's URL is chosen by the caller. The operator's log has
// the cause.
const ReasonFailed = "delivery failed"

// post sends one event. reason is empty on success; otherwise it says what
// failed, in words fit for the config's owner (an HTTP status, a refusal
// by the guard, or [ReasonFailed]), detail says it for the operator's log,
// and retriable whether trying again may help (timeouts, connection
// errors, 5xx, 429).
func (d *Dispatcher) post(ctx context.Context, pd *tasks.PushDelivery, seq uint64, body []byte) (retryAfter time.Duration, reason, detail string, retriable bool) {
	cfg := pd.Config
	id := fmt.Sprintf("%s/%s/%d", cfg.TaskID, cfg.ID, seq) // the same on every retry: receivers de-duplicate on it
	jwt, err := d.signer.Sign(cfg.URL, string(cfg.TaskID), id, body, d.cfg.now())
	if err != nil {
		return 0, ReasonFailed, "sign: " + err.Error(), true
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, strings.NewReader(string(body)))
	if err != nil {
		return 0, ReasonFailed, "bad url: " + err.Error(), false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.HeaderSignature, jwt)
	req.Header.Set(webhook.HeaderDeliveryID, id)
	if cfg.Token != "" {
		req.Header.Set(webhook.HeaderToken, cfg.Token)
		req.Header.Set(webhook.HeaderTokenX, cfg.Token)
	}
	if auth := authorization(cfg.Auth, jwt); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := d.client.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its message repeats the URL, whose query may hold a secret
	}
	if err != nil {
		if errors.Is(err, ErrTargetRefused) { // what the address resolves to now stays in the log
			return 0, ErrTargetRefused.Error(), err.Error(), false
		}
		return 0, ReasonFailed, "post: " + err.Error(), ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, "", "", false
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return parseRetryAfter(resp.Header.Get("Retry-After"), d.cfg.now()), "HTTP " + resp.Status, "HTTP " + resp.Status, true
	}
	return 0, "HTTP " + resp.Status, "HTTP " + resp.Status, false
}

// authorization is the Authorization header of a delivery to a config with
// auth, or "" for none: the config's scheme and credentials when it has
// both; the push JWT as the bearer token when it names no scheme or names
// Bearer without credentials (the push-signature extension promises it);
// nothing for another scheme without credentials. Never an empty credential.
func authorization(auth *a2a.PushAuthInfo, jwt string) string {
	if auth == nil {
		return "Bearer " + jwt
	}
	scheme, creds := strings.TrimSpace(auth.Scheme), strings.TrimSpace(auth.Credentials)
	switch {
	case scheme != "" && creds != "":
		return scheme + " " + creds
	case scheme == "" || strings.EqualFold(scheme, "bearer"):
		return "Bearer " + jwt
	}
	return ""
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
