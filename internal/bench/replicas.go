package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff"
)

// ReplicaOptions configures [RunReplicas].
type ReplicaOptions struct {
	// RedisURL is the Redis the replicas share (redis://HOST:PORT/DB). The
	// run uses a namespace of its own and deletes its keys at the end.
	RedisURL string
	// Duration is the measured time of each setup. Default [DefaultDuration].
	Duration time.Duration
	// Concurrency is the number of concurrent requests. Default 32.
	Concurrency int
	// Replicas is the number of replicas of the scaled setup. Default 3.
	Replicas int
	// Progress gets one line per setup, and the warnings the agents log.
	Progress io.Writer
}

// ReplicaResult is the blocking-send throughput of one setup: replicas
// agents on one store, the load spread over them worker by worker.
type ReplicaResult struct {
	Store    string `json:"store"`
	Replicas int    `json:"replicas"`
	Result
}

// ReplicaReport is what [RunReplicas] measured.
type ReplicaReport struct {
	Started     time.Time       `json:"started"`
	CPUs        int             `json:"cpus"`
	Duration    time.Duration   `json:"duration_per_setup_ns"`
	Concurrency int             `json:"concurrency"`
	Results     []ReplicaResult `json:"results"`
	// RedisVsEmbedded is one replica on Redis over one on the embedded store.
	RedisVsEmbedded float64 `json:"redis_vs_embedded"`
	// Scaling is the replicas on Redis over one replica on Redis.
	Scaling float64 `json:"scaling"`
}

// RunReplicas measures blocking SendMessage (JSON-RPC, the conformance
// agent) on one agent with the embedded store, one on Redis, and several on
// one Redis namespace, in that order, in this process: the agents, Redis's
// client side and the load generator share the machine's CPUs, so on a
// small machine the scaling ratio says what replicas cost rather than what
// they add.
func RunReplicas(ctx context.Context, opts ReplicaOptions) (_ *ReplicaReport, err error) {
	if opts.RedisURL == "" {
		return nil, errors.New("bench replicas: a Redis URL is required")
	}
	if opts.Duration <= 0 {
		opts.Duration = DefaultDuration
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.Replicas <= 1 {
		opts.Replicas = 3
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	dir, err := os.MkdirTemp("", "handoff-bench-replicas-")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	rand.Read(b)
	ns := "bench-" + hex.EncodeToString(b)
	g := newGenerator(opts.Concurrency)
	defer func() {
		g.close()
		err = errors.Join(err, deleteNamespace(opts.RedisURL, ns), os.RemoveAll(dir))
	}()
	log := slog.New(slog.NewTextHandler(opts.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := &ReplicaReport{Started: time.Now().UTC(), CPUs: runtime.GOMAXPROCS(0), Duration: opts.Duration, Concurrency: opts.Concurrency}
	for _, setup := range []struct {
		store    string
		replicas int
	}{{"embedded", 1}, {"redis", 1}, {"redis", opts.Replicas}} {
		res, err := g.measureReplicas(ctx, setup.store, setup.replicas, opts, filepath.Join(dir, fmt.Sprint(len(r.Results))), ns+fmt.Sprint(len(r.Results)), log)
		if err != nil {
			return nil, fmt.Errorf("%d replicas on %s: %w", setup.replicas, setup.store, err)
		}
		if err := deleteNamespace(opts.RedisURL, ns+fmt.Sprint(len(r.Results))); err != nil {
			return nil, err
		}
		r.Results = append(r.Results, res)
		fmt.Fprintf(opts.Progress, "bench: %d × %-8s %9.0f sends/s  p50 %-8s p99 %-8s errors %d\n",
			res.Replicas, res.Store, res.RequestsPerSecond, fmtDuration(res.P50), fmtDuration(res.P99), res.Errors)
	}
	r.RedisVsEmbedded = ratio(r.Results[1].RequestsPerSecond, r.Results[0].RequestsPerSecond)
	r.Scaling = ratio(r.Results[2].RequestsPerSecond, r.Results[1].RequestsPerSecond)
	return r, nil
}

// measureReplicas serves n conformance agents on one store and measures
// blocking sends spread over them.
func (g *generator) measureReplicas(ctx context.Context, store string, n int, opts ReplicaOptions, dir, ns string, log *slog.Logger) (_ ReplicaResult, err error) {
	var makers []func() caller
	// Replicas on Redis share the secret that seals push configs' tokens.
	secret := filepath.Join(dir, "store.secret")
	if store == "redis" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return ReplicaResult{}, fmt.Errorf("write store secret: %w", err)
		}
		if err := os.WriteFile(secret, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
			return ReplicaResult{}, fmt.Errorf("write store secret: %w", err)
		}
	}
	for i := range n {
		cfg, _, err := conformanceConfig()
		if err != nil {
			return ReplicaResult{}, err
		}
		cfg.DataDir = filepath.Join(dir, fmt.Sprint(i))
		if store == "redis" {
			cfg.Store.Kind, cfg.Store.URL, cfg.Store.Namespace = "redis", opts.RedisURL, ns
			cfg.Store.SecretKeyFiles = []string{secret}
		}
		t, stop, err := g.serveAgent(ctx, cfg, log)
		if err != nil {
			return ReplicaResult{}, err
		}
		defer func() { err = errors.Join(err, stop()) }()
		makers = append(makers, g.callers(Send, t))
	}
	next := 0
	newCaller := func() caller { // worker i calls replica i mod n
		next++
		return makers[next%n]()
	}
	drive(ctx, opts.Concurrency, min(opts.Duration/4, 250*time.Millisecond), newCaller)
	l := drive(ctx, opts.Concurrency, opts.Duration, newCaller)
	slices.Sort(l.latencies)
	res := ReplicaResult{Store: store, Replicas: n, Result: Result{
		Scenario: Send, Target: TargetHandoff, Concurrency: opts.Concurrency,
		Requests: l.ok, Errors: l.errors, Seconds: l.elapsed.Seconds(),
		RequestsPerSecond: float64(l.ok) / l.elapsed.Seconds(),
		P50:               percentile(l.latencies, 50), P99: percentile(l.latencies, 99),
	}}
	if l.firstError != nil {
		res.FirstError = l.firstError.Error()
	}
	return res, nil
}

// serveAgent serves one agent of cfg on an ephemeral port until stop.
func (g *generator) serveAgent(ctx context.Context, cfg *handoff.Config, log *slog.Logger) (*target, func() error, error) {
	agent, err := handoff.New(ctx, cfg, handoff.WithLogger(log))
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		agent.Close()
		return nil, nil, err
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- agent.Serve(serveCtx, ln) }()
	base := "http://" + ln.Addr().String()
	return g.newTarget(TargetHandoff, base+jsonrpcPath, base), func() error {
		cancel()
		return <-served
	}, nil
}

// deleteNamespace removes every key of a Redis namespace.
func deleteNamespace(url, ns string) error {
	o, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("bench replicas: %w", err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	it := c.Scan(ctx, 0, "handoff:{"+ns+"}:*", 1000).Iterator()
	for it.Next(ctx) {
		if err := c.Del(ctx, it.Val()).Err(); err != nil {
			return fmt.Errorf("bench replicas: delete %s: %w", it.Val(), err)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("bench replicas: delete namespace %s: %w", ns, err)
	}
	return nil
}

// WriteTable writes the report as a Markdown table with the two ratios.
func (r *ReplicaReport) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "Blocking SendMessage, JSON-RPC, %d concurrent, %s per setup, %d CPUs shared by agents and load generator:\n\n",
		r.Concurrency, r.Duration, r.CPUs)
	tw := tabwriter.NewWriter(ew, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| setup\t sends/s\t p50\t p99\t errors\t")
	fmt.Fprintln(tw, "| ---\t ---\t ---\t ---\t ---\t")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "| %d × %s\t %.0f\t %s\t %s\t %d\t\n", res.Replicas, res.Store, res.RequestsPerSecond, fmtDuration(res.P50), fmtDuration(res.P99), res.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(ew, "\nRedis vs embedded (one replica each): %s; %d replicas vs one (both on Redis): %s\n",
		fmtRatio(r.RedisVsEmbedded), r.Results[len(r.Results)-1].Replicas, fmtRatio(r.Scaling))
	return ew.err
}
