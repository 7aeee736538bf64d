package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff"
)

// RetentionOptions configures the retention curve: a steady workload on
// agents that delete finished tasks Window after they finish.
type RetentionOptions struct {
	// Duration is how long the workload runs. Default 30m; at least 3
	// Windows, so that the size at 2W..3W is measured.
	Duration time.Duration
	// Window is retention.finished_tasks. Default 1m.
	Window time.Duration
	// Rate is the blocking sends per minute to each agent. Default 1,000.
	Rate int
	// Sample is how often the sizes are read. Default 30s; at least 1s.
	Sample time.Duration
}

func (o RetentionOptions) withDefaults() (RetentionOptions, error) {
	if o.Duration == 0 {
		o.Duration = 30 * time.Minute
	}
	if o.Window == 0 {
		o.Window = time.Minute
	}
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.Sample == 0 {
		o.Sample = min(30*time.Second, o.Window/2)
	}
	o.Sample = max(o.Sample, time.Second)
	switch {
	case o.Window < time.Second:
		return o, fmt.Errorf("bench scale: retention window %s: want at least 1s (the config's minimum)", o.Window)
	case o.Duration < 3*o.Window:
		return o, fmt.Errorf("bench scale: retention duration %s: want at least 3 windows (%s)", o.Duration, 3*o.Window)
	case o.Rate < 1:
		return o, fmt.Errorf("bench scale: retention rate %d: want at least 1 send a minute", o.Rate)
	}
	return o, nil
}

// plateauLimit is the retention curve's target: the largest size in the
// run's last half at most this times the largest at 2W..3W.
const plateauLimit = 1.1

// retentionMessage is the ~1 KiB text each send carries.
var retentionMessage = strings.Repeat("retention bench payload. ", 41)

// retentionAgent is one agent under the steady workload.
type retentionAgent struct {
	name    string
	dataDir string
	rpcURL  string
	stop    func() error

	sent, failed atomic.Int64
	mu           sync.Mutex
	latencies    []time.Duration // of the current sample
	firstErr     error
}

// runRetention serves the conformance agent on the embedded store and one
// on Redis side by side, both with retention.finished_tasks = Window,
// sends each Rate blocking messages a minute for Duration, and records a
// point every Sample (its size: the seconds since the workload began).
func runRetention(ctx context.Context, opts ScaleOptions, dir string, cr *CurveReport) (err error) {
	ro := opts.Retention
	b := make([]byte, 8)
	rand.Read(b)
	ns := "bench-retention-" + hex.EncodeToString(b)
	rc, err := redisClient(opts.RedisURL)
	if err != nil {
		return err
	}
	defer rc.Close()
	g := newGenerator(64)
	defer func() {
		g.close()
		err = errors.Join(err, deleteNamespace(opts.RedisURL, ns))
	}()
	log := slog.New(slog.NewTextHandler(opts.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var agents []*retentionAgent
	for _, name := range []string{"embedded", "redis"} {
		cfg, _, err := conformanceConfig()
		if err != nil {
			return err
		}
		cfg.DataDir = filepath.Join(dir, "retention-"+name)
		cfg.Retention.FinishedTasks = &handoff.Duration{Duration: ro.Window}
		if name == "redis" {
			if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
				return fmt.Errorf("retention: make the data directory: %w", err)
			}
			secret := filepath.Join(dir, "retention-store.secret")
			if err := os.WriteFile(secret, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
				return fmt.Errorf("retention: write the store secret: %w", err)
			}
			cfg.Store.Kind, cfg.Store.URL, cfg.Store.Namespace = "redis", opts.RedisURL, ns
			cfg.Store.SecretKeyFiles = []string{secret}
		}
		t, stop, err := g.serveAgent(ctx, cfg, log)
		if err != nil {
			return fmt.Errorf("retention: start the %s agent: %w", name, err)
		}
		a := &retentionAgent{name: name, dataDir: cfg.DataDir, rpcURL: t.rpcURL[Send], stop: stop}
		agents = append(agents, a)
		defer func() { err = errors.Join(err, a.stop()) }()
	}

	// The whole curve is bounded by its duration, with a point's bound of
	// slack for the last sample and the sends in flight.
	rctx, cancel := context.WithTimeout(ctx, ro.Duration+opts.PointTimeout)
	defer cancel()
	loadCtx, stopLoad := context.WithCancel(rctx)
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() { a.drive(loadCtx, g, ro.Rate) })
	}
	started := time.Now()
	tick := time.NewTicker(ro.Sample)
	defer tick.Stop()
	var sampleErr error
	for sampleErr == nil {
		select {
		case <-rctx.Done():
			sampleErr = errPointTimeout
			continue
		case <-tick.C:
		}
		elapsed := time.Since(started)
		last := elapsed >= ro.Duration-ro.Sample/2
		if last {
			stopLoad()
			wg.Wait()
		}
		p := Point{Size: int(elapsed.Round(time.Second) / time.Second)}
		pctx, pcancel := context.WithTimeout(rctx, opts.PointTimeout)
		for _, a := range agents {
			if sampleErr = a.sample(pctx, g, rc, ns, &p); sampleErr != nil {
				break
			}
		}
		if last && sampleErr == nil {
			judgePlateau(cr, &p, ro)
			for _, a := range agents {
				if n := a.failed.Load(); n*100 > a.sent.Load() {
					sampleErr = fmt.Errorf("%s agent: %d of %d sends failed, the first: %v", a.name, n, a.sent.Load(), a.firstErr)
				}
			}
		}
		ended := endPoint(ctx, pctx, opts, cr, p, started, sampleErr)
		pcancel()
		if ended || last {
			break
		}
	}
	stopLoad()
	wg.Wait()
	return nil
}

// drive sends rate blocking messages a minute, each in its own goroutine so
// that a slow answer does not slow the rate, until ctx ends.
func (a *retentionAgent) drive(ctx context.Context, g *generator, rate int) {
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("A2A-Version", "1.0")
	tick := time.NewTicker(time.Minute / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	inflight := make(chan struct{}, 256) // bounds a stuck agent's goroutines
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case inflight <- struct{}{}:
		default:
			a.fail(errors.New("256 sends in flight: the agent is stuck"))
			continue
		}
		a.sent.Add(1)
		wg.Go(func() {
			defer func() { <-inflight }()
			body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"ret-%d","role":"ROLE_USER","parts":[{"text":%q}]}}}`, g.seq.Add(1), retentionMessage)
			var answer bytes.Buffer
			t0 := time.Now()
			// The send is not cut by ctx: a send begun is a task stored.
			err := g.post(context.WithoutCancel(ctx), a.rpcURL, header, body, &answer)
			if err == nil {
				err = checkAnswer(answer.Bytes())
			}
			if err != nil {
				a.fail(err)
				return
			}
			a.mu.Lock()
			a.latencies = append(a.latencies, time.Since(t0))
			a.mu.Unlock()
		})
	}
}

func (a *retentionAgent) fail(err error) {
	a.failed.Add(1)
	a.mu.Lock()
	if a.firstErr == nil {
		a.firstErr = err
	}
	a.mu.Unlock()
}

// sample records in p the agent's sizes, its stored tasks, the tasks
// purged (sent and answered, no longer stored) and the latencies of the
// sends answered since the last sample.
func (a *retentionAgent) sample(ctx context.Context, g *generator, rc *redis.Client, ns string, p *Point) error {
	m := func(name string) string { return a.name + "." + name }
	dirBytes, dbBytes, err := dirSize(a.dataDir)
	if err != nil {
		return err
	}
	p.set(m("dir_bytes"), float64(dirBytes))
	if a.name == "embedded" {
		p.set(m("db_bytes"), float64(dbBytes))
	} else {
		used, keys, nsBytes, err := redisSizes(ctx, rc, ns)
		if err != nil {
			return err
		}
		p.set(m("used_memory_bytes"), float64(used))
		p.set(m("ns_memory_bytes"), float64(nsBytes))
		p.set(m("keys"), float64(keys))
	}
	stored, err := a.storedTasks(ctx, g)
	if err != nil {
		return err
	}
	p.set(m("tasks"), float64(stored))
	a.mu.Lock()
	answered := a.sent.Load() - a.failed.Load()
	ls := a.latencies
	a.latencies = nil
	a.mu.Unlock()
	p.set(m("purged"), float64(max(answered-int64(stored), 0)))
	slices.Sort(ls)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p.set(m("p50_ms"), ms(percentile(ls, 50)))
	p.set(m("p99_ms"), ms(percentile(ls, 99)))
	return nil
}

// storedTasks asks the agent how many tasks it keeps: ListTasks's total.
func (a *retentionAgent) storedTasks(ctx context.Context, g *generator) (int, error) {
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("A2A-Version", "1.0")
	var answer bytes.Buffer
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}`)
	if err := g.post(ctx, a.rpcURL, header, body, &answer); err != nil {
		return 0, fmt.Errorf("retention: list the %s agent's tasks: %w", a.name, err)
	}
	var res struct {
		Result *struct {
			TotalSize int `json:"totalSize"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer.Bytes(), &res); err != nil || res.Result == nil {
		return 0, fmt.Errorf("retention: list the %s agent's tasks: no total in %.200s", a.name, answer.Bytes())
	}
	return res.Result.TotalSize, nil
}

// dirSize returns the bytes of every file under dir, and of the embedded
// task store's file.
func dirSize(dir string) (all, db int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // a file removed while walking
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		all += info.Size()
		if path == filepath.Join(dir, "tasks.db") {
			db = info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("retention: measure %s: %w", dir, err)
	}
	return all, db, nil
}

func redisClient(url string) (*redis.Client, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("bench scale: parse the Redis URL: %w", err)
	}
	return redis.NewClient(o), nil
}

// redisSizes returns Redis's used_memory (the whole server's, which other
// users of it share), and the keys of namespace ns and their memory.
func redisSizes(ctx context.Context, rc *redis.Client, ns string) (used int64, keys int, nsBytes int64, err error) {
	info, err := rc.InfoMap(ctx, "memory").Result()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("retention: read Redis's memory: %w", err)
	}
	used, _ = strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	var batch []string
	flush := func() error {
		pipe := rc.Pipeline()
		cmds := make([]*redis.IntCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.MemoryUsage(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("retention: read the memory of namespace %s: %w", ns, err)
		}
		for _, c := range cmds {
			nsBytes += c.Val() // 0 for a key expired since the scan
		}
		batch = batch[:0]
		return nil
	}
	it := rc.Scan(ctx, 0, "handoff:{"+ns+"}:*", 1000).Iterator()
	for it.Next(ctx) {
		keys++
		if batch = append(batch, it.Val()); len(batch) == 1000 {
			if err := flush(); err != nil {
				return 0, 0, 0, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return 0, 0, 0, fmt.Errorf("retention: scan namespace %s: %w", ns, err)
	}
	if err := flush(); err != nil {
		return 0, 0, 0, err
	}
	return used, keys, nsBytes, nil
}

// plateauMetrics are the sizes the retention curve's target reads.
var plateauMetrics = []string{"embedded.dir_bytes", "embedded.db_bytes", "redis.ns_memory_bytes", "redis.keys"}

// judgePlateau records in last (the curve's final point, not yet in cr),
// for each of [plateauMetrics], the largest size over the run's last half
// over the largest at 2W..3W (the first sample at or after 2W if none
// falls in it): at most [plateauLimit] when the size stopped growing after
// the first window.
func judgePlateau(cr *CurveReport, last *Point, ro RetentionOptions) {
	points := append(slices.Clone(cr.Points), *last)
	w := ro.Window.Seconds()
	half := ro.Duration.Seconds() / 2
	for _, name := range plateauMetrics {
		var early, late float64
		earlySeen := false
		for _, q := range points {
			v, ok := q.Metrics[name]
			if !ok {
				continue
			}
			t := float64(q.Size)
			if t >= 2*w && (t <= 3*w || !earlySeen) {
				early, earlySeen = max(early, v), true
			}
			if t >= half {
				late = max(late, v)
			}
		}
		if earlySeen && early > 0 {
			last.set(strings.TrimSuffix(name, "_bytes")+"_plateau", late/early)
		}
	}
}
