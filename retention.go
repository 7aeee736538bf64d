package handoff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// RetentionConfig says how long finished tasks are kept. Default: forever.
type RetentionConfig struct {
	// FinishedTasks is how long a finished task (completed, failed,
	// canceled, rejected) is kept after its status last changed; then it is
	// deleted with its events, push configs and delivery state, and the
	// blobs no kept task names. Its commit ledger entry stays, marked with
	// when the task was purged. Unset or 0s: forever. At least 1s.
	FinishedTasks *Duration `yaml:"finished_tasks"`
	// Tenants replaces FinishedTasks for the tasks of a tenant, by name.
	Tenants map[string]TenantRetention `yaml:"tenants"`
	// Audit is how long the MCP audit log keeps a tool call's record, and
	// an expired grant stays listed. Unset or 0s: forever. At least 1s.
	Audit *Duration `yaml:"audit"`
}

// TenantRetention is one tenant's retention.
type TenantRetention struct {
	// FinishedTasks is how long the tenant's finished tasks are kept; 0s:
	// forever. Required; at least 1s.
	FinishedTasks *Duration `yaml:"finished_tasks"`
}

// policy is the retention the stores apply.
func (c *RetentionConfig) policy() tasks.Retention {
	var r tasks.Retention
	if c.FinishedTasks != nil {
		r.Finished = c.FinishedTasks.Duration
	}
	for name, t := range c.Tenants {
		if r.Tenants == nil {
			r.Tenants = map[string]time.Duration{}
		}
		if t.FinishedTasks != nil {
			r.Tenants[name] = t.FinishedTasks.Duration
		}
	}
	return r
}

// validate reports a window under a second, and a tenant without one.
func (c *RetentionConfig) validate(bad func(key, format string, args ...any)) {
	check := func(key string, d *Duration) {
		if d != nil && d.Duration > 0 && d.Duration < time.Second {
			bad(key, "%s is under the minimum of 1s (0s keeps tasks forever)", d.Duration)
		}
	}
	check("retention.finished_tasks", c.FinishedTasks)
	check("retention.audit", c.Audit)
	names := make([]string, 0, len(c.Tenants))
	for name := range c.Tenants {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		key := "retention.tenants." + name
		if c.Tenants[name].FinishedTasks == nil {
			bad(key, "finished_tasks is required (0s keeps the tenant's tasks forever)")
			continue
		}
		check(key+".finished_tasks", c.Tenants[name].FinishedTasks)
	}
}

// blobIndex tells the task store which blobs a task names: the raw parts a
// delegate skill stored, whose metadata skill.BlobKey holds their digest.
var blobIndex = tasks.BlobIndex{Marker: skill.BlobKey, Digests: blobDigests}

// blobDigests returns the digests of the blobs t's artifacts name.
func blobDigests(t *a2a.Task) []string {
	var out []string
	for _, art := range t.Artifacts {
		if art == nil {
			continue
		}
		for _, p := range art.Parts {
			if p == nil {
				continue
			}
			if meta, _ := p.Metadata[skill.BlobKey].(map[string]any); meta != nil {
				if d, ok := meta["digest"].(string); ok {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// purgeMarker is what retention needs of the commit ledger.
type purgeMarker interface {
	MarkPurged(ctx context.Context, at time.Time, tasks ...string) (int, error)
}

// purger deletes finished tasks past their window, with what they name
// outside the task store: it marks their ledger entries, deletes the blobs
// no kept task names and the executors' state of the tasks.
type purger struct {
	store  tasks.Purger
	keep   tasks.Retention
	ledger purgeMarker      // nil: no ledger
	blobs  *artifacts.Store // nil: no blobs
	state  skill.State      // nil: no executor state
	log    *slog.Logger
}

// purgeBatch is how many tasks one purge deletes: on the embedded store
// each batch is one transaction of the store's write path, a few ms.
const purgeBatch = 100

// interval is how often the purger looks for expired tasks: a quarter of
// the shortest window, between 250 ms and a minute.
func (p *purger) interval() time.Duration {
	return min(max(p.keep.Shortest()/4, 250*time.Millisecond), time.Minute)
}

// run purges every interval until ctx ends.
func (p *purger) run(ctx context.Context) {
	t := time.NewTicker(p.interval())
	defer t.Stop()
	for {
		if n, err := p.round(ctx, time.Now(), nil); err != nil && ctx.Err() == nil {
			p.log.Warn("retention: purge", slog.Any("error", err))
		} else if n > 0 {
			p.log.Debug("retention: purged finished tasks", slog.Int("tasks", n))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round purges, a batch at a time, every task expired at now, and returns
// how many it deleted. seen, when set, hears of each batch deleted.
// Ledger entries are marked before their tasks are deleted, so a crash in
// between leaves a mark early rather than a purged task without one; blobs
// and executor state go after, and a crash before leaves them for no task.
func (p *purger) round(ctx context.Context, now time.Time, seen func(*tasks.PurgeResult)) (int, error) {
	total := 0
	for {
		exp, err := p.store.Expired(ctx, p.keep, now, purgeBatch)
		if err != nil || len(exp) == 0 {
			return total, err
		}
		ids := make([]a2a.TaskID, len(exp))
		names := make([]string, len(exp))
		for i, e := range exp {
			ids[i], names[i] = e.ID, string(e.ID)
		}
		if p.ledger != nil {
			if _, err := p.ledger.MarkPurged(ctx, now, names...); err != nil {
				return total, err
			}
		}
		start := time.Now()
		res, err := p.store.Purge(ctx, p.keep, now, ids)
		if err != nil {
			return total, err
		}
		took := time.Since(start)
		total += len(res.Tasks)
		var errs []error
		if p.blobs != nil {
			for _, d := range res.Blobs {
				errs = append(errs, p.blobs.DeleteRaw(d))
			}
		}
		if p.state != nil {
			for _, t := range res.Tasks {
				errs = append(errs, skill.ForgetTask(ctx, p.state, t.ID))
			}
		}
		if seen != nil {
			seen(res)
		}
		if err := errors.Join(errs...); err != nil {
			return total, err
		}
		if len(exp) < purgeBatch || len(res.Tasks) == 0 {
			return total, nil
		}
		// A backlog is purged at half the store's pace at most: requests
		// that wait for the store's write path (a read of what was just
		// written, on the embedded store) get the other half.
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(took):
		}
	}
}

// auditPruner is what retention needs of the audit log and the grants.
type auditPruner interface {
	Prune(ctx context.Context, before time.Time) (int, error)
}

type grantPruner interface {
	PruneExpired(ctx context.Context, before time.Time) (int, error)
}

// pruneAudit deletes, every quarter of window (between a second and an
// hour) until ctx ends, the audit records older than window and the grants
// that expired longer ago.
func pruneAudit(ctx context.Context, audit auditPruner, grants grantPruner, window time.Duration, log *slog.Logger) {
	t := time.NewTicker(min(max(window/4, time.Second), time.Hour))
	defer t.Stop()
	for {
		before := time.Now().Add(-window)
		_, err := audit.Prune(ctx, before)
		if grants != nil {
			_, gerr := grants.PruneExpired(ctx, before)
			err = errors.Join(err, gerr)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("retention: prune the audit log", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// startRetention runs the purger and the audit log's pruning until ctx
// ends, as far as the config keeps things for a while; wait waits for them
// to stop.
func (a *Agent) startRetention(ctx context.Context) (wait func()) {
	var done []chan struct{}
	wait = func() {
		for _, d := range done {
			<-d
		}
	}
	if w := a.cfg.Retention.Audit; w != nil && w.Duration > 0 && a.tools != nil {
		audit := a.tools.audit
		if o, ok := audit.(observedAudit); ok {
			audit = o.auditLog
		}
		if ap, ok := audit.(auditPruner); ok {
			gp, _ := a.tools.grants.(grantPruner)
			d := make(chan struct{})
			done = append(done, d)
			go func() {
				defer close(d)
				pruneAudit(ctx, ap, gp, w.Duration, a.log)
			}()
		}
	}
	keep := a.cfg.Retention.policy()
	ps, ok := a.store.(tasks.Purger)
	if keep.Shortest() == 0 || !ok {
		return wait
	}
	p := &purger{store: ps, keep: keep, log: a.log}
	if a.del != nil {
		p.ledger, _ = a.del.ledger.(purgeMarker)
		p.blobs = a.del.artifacts
	}
	if a.models != nil {
		p.state = a.models.state
	}
	d := make(chan struct{})
	done = append(done, d)
	go func() {
		defer close(d)
		p.run(ctx)
	}()
	return wait
}

// retentionOptions are the task store's options for retention: the blob
// index always (a task kept from before retention was turned on must still
// hold its blobs), and on Redis the expiry of finished tasks' keys.
func retentionOptions(cfg *Config) (bolt []boltstore.Option, redis []redisstore.Option) {
	return []boltstore.Option{boltstore.WithBlobIndex(blobIndex)},
		[]redisstore.Option{redisstore.WithBlobIndex(blobIndex), redisstore.WithRetention(cfg.Retention.policy())}
}

// PurgeReport is what [PurgeStores] found, or deleted.
type PurgeReport struct {
	// Tasks are the finished tasks past their window: deleted, unless the
	// purge was a dry run.
	Tasks []tasks.Expiring `json:"tasks"`
	// Blobs are the blobs deleted with them (none in a dry run).
	Blobs []string `json:"blobs,omitempty"`
	// Deleted says whether the tasks were deleted.
	Deleted bool `json:"deleted"`
}

// maxListed bounds the tasks a dry run lists.
const maxListed = 1 << 20

// PurgeStores deletes, from the stores of a stopped agent (cfg.DataDir, or
// cfg.Store on Redis), the finished tasks past the windows keep gives, as
// the running agent's retention would: ledger entries marked, blobs no
// kept task names and the executors' state deleted. With dry set it only
// lists them. The embedded store of a running agent is refused (its files
// are locked) with an error naming the data directory.
func PurgeStores(ctx context.Context, cfg *Config, keep tasks.Retention, dry bool) (*PurgeReport, error) {
	p, closeStores, err := openAdminStores(ctx, cfg, !dry)
	if err != nil {
		return nil, err
	}
	defer closeStores()
	now := time.Now()
	rep := &PurgeReport{Deleted: !dry}
	if dry {
		exp, err := p.store.Expired(ctx, keep, now, maxListed)
		if err != nil {
			return nil, err
		}
		rep.Tasks = exp
		return rep, nil
	}
	p.keep = keep
	_, err = p.round(ctx, now, func(r *tasks.PurgeResult) {
		rep.Tasks = append(rep.Tasks, r.Tasks...)
		rep.Blobs = append(rep.Blobs, r.Blobs...)
	})
	if err != nil {
		return rep, fmt.Errorf("purge: %w", err)
	}
	return rep, nil
}

// StoreStats describes the task store of a stopped agent (cfg.DataDir), or
// of an agent on Redis (cfg.Store).
func StoreStats(ctx context.Context, cfg *Config) (*tasks.StoreStats, error) {
	p, closeStores, err := openAdminStores(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	defer closeStores()
	return p.store.Stats(ctx)
}

// openAdminStores opens the task store cfg names and, to write (a purge),
// the ledger, the artifacts and the executor state the agent keeps beside
// it, where they exist. Push secrets are never opened: no sealer is needed.
func openAdminStores(ctx context.Context, cfg *Config, write bool) (*purger, func(), error) {
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	p := &purger{log: slog.New(slog.DiscardHandler)}
	boltOpts, redisOpts := retentionOptions(cfg)
	if cfg.Store.Kind == "redis" {
		s, err := redisstore.Open(ctx, cfg.Store.URL, cfg.Store.Namespace, redisOpts...)
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, s.Close)
		p.store = s
		if write {
			if p.ledger, err = acceptance.NewRedisLedger(s.Client(), cfg.Store.Namespace); err != nil {
				closeAll()
				return nil, nil, err
			}
			if p.state, err = skill.NewRedisState(s.Client(), cfg.Store.Namespace); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
	} else {
		if err := datadir.Check(cfg.DataDir); err != nil {
			return nil, nil, err
		}
		path := filepath.Join(cfg.DataDir, datadir.TaskStore)
		s, err := boltstore.Open(path, time.Second, boltOpts...)
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, nil, fmt.Errorf("the agent using %s is running (it holds %s): stop it first, or ask a store on Redis", cfg.DataDir, path)
		}
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, s.Close)
		p.store = s
		if write {
			if f, err := datadir.Find(cfg.DataDir, datadir.Ledger); err == nil && f != "" {
				l, err := acceptance.OpenBoltLedger(f)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				closers = append(closers, l.Close)
				p.ledger = l
			}
			if f, err := datadir.Find(cfg.DataDir, datadir.ExecutorState); err == nil && f != "" {
				st, err := skill.OpenBoltState(f)
				if err != nil {
					closeAll()
					return nil, nil, err
				}
				closers = append(closers, st.Close)
				p.state = st
			}
		}
	}
	if dir := cfg.artifactsDir(); write {
		if _, err := os.Stat(dir); err == nil {
			arts, err := artifacts.NewStore(dir)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			p.blobs = arts
		}
	}
	return p, closeAll, nil
}
