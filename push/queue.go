package push

import (
	"context"
	"log/slog"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/uuid"

	"github.com/handoff-a2a/handoff/tasks"
)

// sharedQueue is a task store whose push delivery queue the replicas of an
// agent share (the Redis store, tasks/redisstore): each job ("deliver what is pending for
// this task") goes to one replica, and the jobs of a replica that died are
// claimed by another once idle for long enough.
type sharedQueue interface {
	EnqueuePush(ctx context.Context, task a2a.TaskID) error
	NextPushJobs(ctx context.Context, consumer string, block, minIdle time.Duration) ([]tasks.PushJob, error)
	TouchPushJobs(ctx context.Context, consumer string, ids []string) error
	AckPushJobs(ctx context.Context, ids []string) error
	LaggingPushTasks(ctx context.Context) ([]a2a.TaskID, error)
	LockPushTask(ctx context.Context, task a2a.TaskID, holder string, ttl time.Duration) (bool, error)
	UnlockPushTask(ctx context.Context, task a2a.TaskID, holder string) error
}

// DefaultClaimIdle is how long a job a replica holds may go untouched before
// another replica claims it; see [WithClaimIdle].
const DefaultClaimIdle = 15 * time.Second

// jobWait is how long a read of the queue waits for a job, and the pause
// between two attempts at a busy or unreachable queue.
const jobWait = time.Second

// sharedState is the dispatcher's side of the shared queue; its maps are
// guarded by Dispatcher.mu.
type sharedState struct {
	consumer string
	active   map[a2a.TaskID]int // workers per task
	groups   map[a2a.TaskID]*jobGroup
	failing  bool // the last read of the queue failed: log only changes
}

// jobGroup gathers this replica's jobs of one task: they are acknowledged
// together once every config of the task has nothing left to deliver.
type jobGroup struct {
	task   a2a.TaskID
	ids    []string
	locked bool          // the task's lock is ours and its workers run
	done   chan struct{} // closed once locked and no worker is left
}

func newSharedState() *sharedState {
	return &sharedState{consumer: uuid.NewString(), active: map[a2a.TaskID]int{}, groups: map[a2a.TaskID]*jobGroup{}}
}

// enqueue queues a job for a task that committed events. A failed attempt
// is retried for a while, since a lost job leaves the event undelivered
// until the task's next commit.
func (d *Dispatcher) enqueue(ctx context.Context, task a2a.TaskID) {
	delay := 100 * time.Millisecond
	for {
		err := d.queue.EnqueuePush(ctx, task)
		if err == nil || ctx.Err() != nil {
			return
		}
		if delay > 30*time.Second {
			d.cfg.logger.Error("push: queue delivery", slog.String("task_id", string(task)), slog.Any("error", err))
			return
		}
		pause(ctx, delay)
		delay *= 2
	}
}

// runShared takes jobs from the shared queue until ctx ends. Every
// claimIdle it also queues a job for each task whose deliveries lag with
// none under way: a replica that dies between storing a task's events and
// queueing their job (Notify queues after the write) leaves such a task,
// which is then delivered within claimIdle of the next scan.
func (d *Dispatcher) runShared(ctx context.Context) error {
	touched := make(chan struct{})
	go func() {
		defer close(touched)
		touch := time.NewTicker(d.cfg.claimIdle / 3)
		defer touch.Stop()
		scan := time.NewTimer(0)
		defer scan.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-touch.C:
				d.touch(ctx)
			case <-scan.C:
				d.requeueLagging(ctx)
				scan.Reset(d.cfg.claimIdle)
			}
		}
	}()
	for ctx.Err() == nil {
		jobs, err := d.queue.NextPushJobs(ctx, d.shared.consumer, jobWait, d.cfg.claimIdle)
		d.mu.Lock()
		was := d.shared.failing
		d.shared.failing = err != nil
		d.mu.Unlock()
		if err != nil {
			if !was && ctx.Err() == nil {
				d.cfg.logger.Warn("push: read the delivery queue", slog.Any("error", err))
			}
			pause(ctx, jobWait)
			continue
		}
		for _, j := range jobs {
			d.take(ctx, j)
		}
	}
	<-touched
	d.drain()
	return nil
}

// take adds a job to its task's group, starting one if none runs. A job
// joining a group that delivers already makes its workers look again, in
// the same critical section, so the group cannot end without them seeing
// the job's events.
func (d *Dispatcher) take(ctx context.Context, j tasks.PushJob) {
	pds, err := d.store.PushDeliveries(ctx, j.Task)
	if err != nil { // left pending: claimed again once idle
		d.cfg.logger.Error("push: read configs", slog.String("task_id", string(j.Task)), slog.Any("error", err))
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.shared.groups[j.Task]; g != nil {
		g.ids = append(g.ids, j.ID)
		if g.locked {
			for _, pd := range pds {
				d.nudgeLocked(j.Task, pd.Config.ID)
			}
		}
		return
	}
	g := &jobGroup{task: j.Task, ids: []string{j.ID}, done: make(chan struct{})}
	d.shared.groups[j.Task] = g
	d.wg.Add(1)
	go d.serve(ctx, g)
}

// serve locks the group's task across replicas, delivers what is pending
// for each of its configs, and acknowledges the group's jobs.
func (d *Dispatcher) serve(ctx context.Context, g *jobGroup) {
	defer d.wg.Done()
	holder := d.shared.consumer
	for {
		ok, err := d.queue.LockPushTask(ctx, g.task, holder, d.cfg.claimIdle)
		if ok {
			break
		}
		if err != nil && ctx.Err() == nil {
			d.cfg.logger.Warn("push: lock deliveries", slog.String("task_id", string(g.task)), slog.Any("error", err))
		}
		pause(ctx, jobWait) // another replica delivers this task: wait for it
		if ctx.Err() != nil {
			return // the jobs stay pending, for whoever runs next
		}
	}
	unlock := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if err := d.queue.UnlockPushTask(uctx, g.task, holder); err != nil {
			d.cfg.logger.Warn("push: unlock deliveries", slog.String("task_id", string(g.task)), slog.Any("error", err))
		}
	}
	defer unlock()
	pds, err := d.store.PushDeliveries(ctx, g.task)
	d.mu.Lock()
	if err != nil {
		delete(d.shared.groups, g.task) // its jobs stay pending and are claimed again
		d.mu.Unlock()
		d.cfg.logger.Error("push: read configs", slog.String("task_id", string(g.task)), slog.Any("error", err))
		return
	}
	g.locked = true
	for _, pd := range pds {
		d.nudgeLocked(g.task, pd.Config.ID)
	}
	if d.shared.active[g.task] == 0 {
		d.closeLocked(g)
	}
	d.mu.Unlock()
	select {
	case <-g.done:
	case <-ctx.Done():
		return
	}
	d.mu.Lock()
	ids := g.ids // the group left the map when it closed: no job joins it now
	d.mu.Unlock()
	if err := d.queue.AckPushJobs(context.WithoutCancel(ctx), ids); err != nil {
		d.cfg.logger.Warn("push: acknowledge jobs", slog.String("task_id", string(g.task)), slog.Any("error", err))
	}
}

// retiredLocked counts a worker of task that found nothing more to do; the
// last one ends the task's group.
func (d *Dispatcher) retiredLocked(task a2a.TaskID) {
	d.shared.active[task]--
	if d.shared.active[task] > 0 {
		return
	}
	delete(d.shared.active, task)
	if g := d.shared.groups[task]; g != nil && g.locked {
		d.closeLocked(g)
	}
}

func (d *Dispatcher) closeLocked(g *jobGroup) {
	delete(d.shared.groups, g.task)
	close(g.done)
}

// requeueLagging queues a job for every task whose deliveries lag with no
// delivery under way; a duplicate job finds nothing to do.
func (d *Dispatcher) requeueLagging(ctx context.Context) {
	lagging, err := d.queue.LaggingPushTasks(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.logger.Warn("push: scan for lagging deliveries", slog.Any("error", err))
		}
		return
	}
	for _, task := range lagging {
		if err := d.queue.EnqueuePush(ctx, task); err != nil && ctx.Err() == nil {
			d.cfg.logger.Warn("push: queue delivery", slog.String("task_id", string(task)), slog.Any("error", err))
		}
	}
}

// touch keeps this replica's jobs and task locks from being claimed.
func (d *Dispatcher) touch(ctx context.Context) {
	d.mu.Lock()
	var ids []string
	var locked []a2a.TaskID
	for _, g := range d.shared.groups {
		ids = append(ids, g.ids...)
		if g.locked {
			locked = append(locked, g.task)
		}
	}
	d.mu.Unlock()
	if err := d.queue.TouchPushJobs(ctx, d.shared.consumer, ids); err != nil && ctx.Err() == nil {
		d.cfg.logger.Warn("push: touch jobs", slog.Any("error", err))
	}
	for _, task := range locked {
		if ok, err := d.queue.LockPushTask(ctx, task, d.shared.consumer, d.cfg.claimIdle); err == nil && !ok {
			d.cfg.logger.Warn("push: another replica took over deliveries", slog.String("task_id", string(task)))
		}
	}
	// A request to retry made on another replica reaches a task this one
	// holds only through the store: its workers read their state again.
	held := make(map[a2a.TaskID]bool, len(locked))
	for _, task := range locked {
		held[task] = true
	}
	d.mu.Lock()
	for _, w := range d.workers {
		if held[w.task] {
			w.reload = true
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	d.mu.Unlock()
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
