package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"

	"github.com/handoff-a2a/handoff/tasks"
)

// RetryStore is what [Dispatcher.Retry] needs of the task store beyond a
// [DeliveryStore] (both task stores implement it): requests to retry kept
// beside the config's delivery state, which a worker writing its state
// leaves alone.
type RetryStore interface {
	AddPushRetry(ctx context.Context, task a2a.TaskID, config string, r tasks.PushRetry) error
	RemovePushRetry(ctx context.Context, task a2a.TaskID, config, id string) error
}

// Retry asks for the delivery now of event seq of a push config of task:
// a dead letter is sent once more; the event being retried is tried
// without waiting out its backoff. Seq 0 asks for every dead letter of the
// config and the event being retried. owner must be the task's owner
// (another's config is [tasks.ErrNotFound]); by names the operator, for
// the log.
//
// Retry does not deliver: it stores the request with the config and wakes
// the config's delivery worker, the one that holds the task's deliveries
// (on a shared store, whichever replica that is), which handles it between
// two attempts of its own. So no event is ever sent by two workers at once,
// a request outlives a restart, and one made twice, or for an event
// delivered meanwhile, sends nothing more. It fails with
// [ErrNothingToRetry] when seq is neither a dead letter nor being retried.
func (d *Dispatcher) Retry(ctx context.Context, owner tasks.Owner, task a2a.TaskID, config string, seq uint64, by string) (tasks.PushRetry, error) {
	rs, ok := d.store.(RetryStore)
	if !ok {
		return tasks.PushRetry{}, fmt.Errorf("retry push delivery: %w", ErrRetryUnsupported)
	}
	pds, err := d.store.PushDeliveries(ctx, task)
	if err != nil {
		return tasks.PushRetry{}, fmt.Errorf("retry push delivery: %w", err)
	}
	var pd *tasks.PushDelivery
	for _, p := range pds {
		if p.Config.ID == config && p.Owner == owner {
			pd = p
		}
	}
	if pd == nil {
		return tasks.PushRetry{}, fmt.Errorf("retry push delivery: config %s of task %s: %w", config, task, tasks.ErrNotFound)
	}
	if !retriable(pd, seq) {
		if seq == 0 {
			return tasks.PushRetry{}, fmt.Errorf("retry push delivery: config %s of task %s has no dead letter and no delivery being retried: %w", config, task, ErrNothingToRetry)
		}
		return tasks.PushRetry{}, fmt.Errorf("retry push delivery: event %d of config %s of task %s is neither a dead letter nor being retried: %w", seq, config, task, ErrNothingToRetry)
	}
	r := tasks.PushRetry{ID: uuid.NewString(), Seq: seq, By: by, At: d.cfg.now()}
	if err := rs.AddPushRetry(ctx, task, config, r); err != nil {
		return tasks.PushRetry{}, fmt.Errorf("retry push delivery: %w", err)
	}
	d.cfg.logger.Info("push: retry requested", slog.String("task_id", string(task)), slog.String("config", config),
		slog.Uint64("seq", seq), slog.String("operator", by), slog.String("request", r.ID))
	d.wakeForRetry(task, config)
	return r, nil
}

// retriable reports whether seq (0: any) of pd is a dead letter or the
// event being retried.
func retriable(pd *tasks.PushDelivery, seq uint64) bool {
	if pd.Attempts > 0 && (seq == 0 || seq == pd.Delivered+1) {
		return true
	}
	return slices.ContainsFunc(pd.Dead, func(x tasks.DeadDelivery) bool { return seq == 0 || x.Seq == seq })
}

// wakeForRetry makes the config's worker read its state again, where the
// request now is. On a shared store the worker may run on another replica:
// a job wakes an idle task's deliveries wherever they are taken, and the
// replica that holds a busy task's reloads its workers at every touch.
func (d *Dispatcher) wakeForRetry(task a2a.TaskID, config string) {
	d.Watch(task)
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.workers[string(task)+"\x00"+config]; w != nil {
		w.reload = true
	}
	if d.queue != nil {
		if d.ctx != nil && d.ctx.Err() == nil {
			go d.enqueue(d.ctx, task)
		}
		if d.workers[string(task)+"\x00"+config] == nil {
			return // not ours to start: the job's taker locks the task first
		}
	}
	d.nudgeLocked(task, config)
}

// takeRetries handles the requests to retry that came with the worker's
// state, oldest first. Each is removed once handled, after the state it led
// to is stored: a crash in between handles it again, and what it finds
// delivered then is not sent again.
func (d *Dispatcher) takeRetries(ctx context.Context, w *worker) error {
	rs, ok := d.store.(RetryStore)
	if !ok {
		return nil
	}
	for len(w.pd.Retries) > 0 {
		r := w.pd.Retries[0]
		if err := d.takeRetry(ctx, w, r); err != nil {
			return err
		}
		if err := rs.RemovePushRetry(ctx, w.task, w.config, r.ID); err != nil {
			return err
		}
		w.pd.Retries = w.pd.Retries[1:]
	}
	return nil
}

// takeRetry handles one request: each event it names is a dead letter sent
// once more, the event being retried made due now, or gone (delivered
// since, or asked for twice), which sends nothing.
func (d *Dispatcher) takeRetry(ctx context.Context, w *worker, r tasks.PushRetry) error {
	pd := w.pd
	seqs := []uint64{r.Seq}
	if r.Seq == 0 {
		seqs = nil
		for _, x := range pd.Dead {
			seqs = append(seqs, x.Seq)
		}
		if pd.Attempts > 0 {
			seqs = append(seqs, pd.Delivered+1)
		}
	}
	log := d.cfg.logger.With(slog.String("task_id", string(w.task)), slog.String("config", w.config), slog.String("operator", r.By), slog.String("request", r.ID))
	for _, seq := range seqs {
		i := slices.IndexFunc(pd.Dead, func(x tasks.DeadDelivery) bool { return x.Seq == seq })
		switch {
		case pd.Attempts > 0 && seq == pd.Delivered+1:
			pd.NextAttempt = d.cfg.now()
			if err := d.store.UpdatePushDelivery(ctx, pd); err != nil {
				return err
			}
			log.Info("push: retrying now", slog.Uint64("seq", seq), slog.Int("attempts", pd.Attempts))
			d.observeRetry(RetryNow)
		case i >= 0:
			if err := d.redeliver(ctx, w, i, log); err != nil {
				return err
			}
		default:
			log.Info("push: nothing to retry: delivered already", slog.Uint64("seq", seq))
			d.observeRetry(RetryStale)
		}
	}
	return nil
}

// redeliver sends dead letter i of the worker's config once more. Sent, it
// leaves the dead letters; refused, it stays, with this attempt counted.
func (d *Dispatcher) redeliver(ctx context.Context, w *worker, i int, log *slog.Logger) error {
	pd := w.pd
	dl := pd.Dead[i]
	evs, err := d.store.Events(ctx, pd.Owner, w.task, dl.Seq-1)
	if err != nil {
		return err
	}
	if len(evs) == 0 || evs[0].Seq != dl.Seq {
		return fmt.Errorf("event %d of task %s is not in its log any more", dl.Seq, w.task)
	}
	body, err := json.Marshal(a2a.StreamResponse{Event: evs[0].Event})
	if err != nil {
		return fmt.Errorf("encode event %d: %w", dl.Seq, err)
	}
	now := d.cfg.now()
	_, reason, detail, _ := d.post(ctx, pd, dl.Seq, body)
	if reason != "" && ctx.Err() != nil {
		return fmt.Errorf("redeliver event %d: %w", dl.Seq, ctx.Err()) // stopping: the request stays for the next start
	}
	if reason == "" {
		pd.Dead = slices.Delete(pd.Dead, i, i+1)
		pd.DeliveredCount++
		log.Info("push: dead letter redelivered", slog.Uint64("seq", dl.Seq))
		d.observeRetry(RetryDelivered)
	} else {
		pd.Dead[i] = tasks.DeadDelivery{Seq: dl.Seq, Attempts: dl.Attempts + 1, Reason: reason, At: now}
		log.Warn("push: redelivery of a dead letter failed", slog.Uint64("seq", dl.Seq), slog.String("reason", reason), slog.String("error", detail))
		d.observeRetry(RetryFailed)
	}
	return d.store.UpdatePushDelivery(ctx, pd)
}

func (d *Dispatcher) observeRetry(outcome string) {
	if o, ok := d.cfg.observer.(RetryObserver); ok {
		o.Retried(outcome)
	}
}

// errGone reports whether err says the config was deleted.
func errGone(err error) bool { return errors.Is(err, tasks.ErrNotFound) }
