package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A Scenario is one kind of request the targets are measured on.
type Scenario string

const (
	// Send is a blocking SendMessage in JSON-RPC 1.0 over HTTP/1.1, answered
	// with the completed task.
	Send Scenario = "send"
	// Stream is SendStreamingMessage in JSON-RPC 1.0, read to the final
	// event of its server-sent events.
	Stream Scenario = "stream"
	// Get is GetTask, in JSON-RPC 1.0, of a task created before the run.
	Get Scenario = "get"
	// GRPC is a blocking SendMessage over gRPC (HTTP/2 without TLS) from a
	// connect client.
	GRPC Scenario = "grpc"
)

// Scenarios returns every scenario, in the order a run measures them.
func Scenarios() []Scenario { return []Scenario{Send, Stream, Get, GRPC} }

func (s Scenario) title() string {
	switch s {
	case Send:
		return "blocking SendMessage, JSON-RPC 1.0 over HTTP/1.1"
	case Stream:
		return "SendStreamingMessage, JSON-RPC 1.0, SSE read to the final event"
	case Get:
		return "GetTask, JSON-RPC 1.0 over HTTP/1.1"
	case GRPC:
		return "blocking SendMessage over gRPC (connect client, HTTP/2 cleartext); the SDK is a2a-go's grpc-go binding"
	}
	return string(s)
}

// DefaultDuration is how long each cell is measured by default: long enough
// for a steady rate, short enough that the default run of 36 cells takes
// well under three minutes.
const DefaultDuration = 2 * time.Second

// Options configures [Run]. The zero value is the default run.
type Options struct {
	// Duration is the measured time of each cell (one scenario, concurrency
	// and target). Default [DefaultDuration].
	Duration time.Duration
	// Warmup is the load put on a target before each cell's measure, to
	// open connections and grow pools; it is not counted. Default a quarter
	// of Duration, at most 250ms.
	Warmup time.Duration
	// Rounds is how many turns each target takes in a cell, each measured
	// for Duration/Rounds, the three in turn: a drift of the machine's speed
	// during the cell (other work on it, the disk) then touches the three
	// alike. Default 4.
	Rounds int
	// Concurrency lists the numbers of concurrent requests. Default 1, 16, 64.
	Concurrency []int
	// Scenarios lists what to measure. Default all of [Scenarios].
	Scenarios []Scenario
	// Progress gets one line per cell as the run goes, and the warnings the
	// targets log. Nil: nothing is written.
	Progress io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Warmup == 0 {
		o.Warmup = min(o.Duration/4, 250*time.Millisecond)
	}
	if o.Rounds == 0 {
		o.Rounds = 4
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 16, 64}
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Duration < 0 || o.Warmup < 0 {
		return o, errors.New("bench: durations must be positive")
	}
	if o.Rounds < 1 {
		return o, fmt.Errorf("bench: %d rounds; at least 1", o.Rounds)
	}
	for _, c := range o.Concurrency {
		if c < 1 {
			return o, fmt.Errorf("bench: concurrency %d is below 1", c)
		}
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return o, fmt.Errorf("bench: unknown scenario %q", s)
		}
	}
	return o, nil
}

// Run starts the three targets, measures every scenario at every
// concurrency on each, stops them and reports. The targets take turns
// within each cell (limit, SDK, Handoff), so a drift of the machine's speed
// during the run touches all three alike.
func Run(ctx context.Context, opts Options) (_ *Report, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "handoff-bench-")
	if err != nil {
		return nil, err
	}
	g := newGenerator(slices.Max(opts.Concurrency))
	var stops []func() error
	defer func() {
		g.close()
		for _, stop := range slices.Backward(stops) {
			err = errors.Join(err, stop())
		}
		err = errors.Join(err, os.RemoveAll(dir))
	}()

	log := slog.New(slog.NewTextHandler(opts.Progress, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var (
		handoffT, sdk, limit *target
		source               string
	)
	// Each target starts under a profiler label of its name, which every
	// goroutine it starts inherits: a CPU profile of the run splits by
	// target (pprof -tagfocus target=handoff).
	labelled(ctx, TargetHandoff, func(ctx context.Context) { handoffT, source, err = g.startHandoff(ctx, dir, log) })
	if err != nil {
		return nil, fmt.Errorf("start Handoff: %w", err)
	}
	stops = append(stops, handoffT.stop)
	labelled(ctx, TargetSDK, func(context.Context) { sdk, err = g.startSDK() })
	if err != nil {
		return nil, fmt.Errorf("start the SDK: %w", err)
	}
	stops = append(stops, sdk.stop)
	rec, err := g.record(ctx, handoffT)
	if err != nil {
		return nil, err
	}
	if err := g.createTask(ctx, sdk); err != nil {
		return nil, err
	}
	labelled(ctx, TargetLimit, func(context.Context) { limit, err = g.startLimit(rec) })
	if err != nil {
		return nil, fmt.Errorf("start the limit: %w", err)
	}
	stops = append(stops, limit.stop)
	limit.taskID = handoffT.taskID // the same request bytes as Handoff's

	r := &Report{
		Started:      time.Now().UTC(),
		GoVersion:    runtime.Version(),
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
		CPUs:         runtime.GOMAXPROCS(0),
		Config:       source,
		Duration:     opts.Duration,
		Warmup:       opts.Warmup,
		Rounds:       opts.Rounds,
		PeakRSSReset: true,
	}
	total := len(opts.Scenarios) * len(opts.Concurrency) * 3
	for _, sc := range opts.Scenarios {
		for _, c := range opts.Concurrency {
			results, reset := g.measure(ctx, sc, c, []*target{limit, sdk, handoffT}, opts)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			r.PeakRSSReset = r.PeakRSSReset && reset
			for _, res := range results {
				r.Results = append(r.Results, res)
				fmt.Fprintf(opts.Progress, "bench: [%2d/%d] %-6s c=%-3d %-7s %9.0f req/s  p99 %-8s errors %d  (elapsed %s)\n",
					len(r.Results), total, sc, c, res.Target, res.RequestsPerSecond, fmtDuration(res.P99), res.Errors,
					time.Since(r.Started).Round(100*time.Millisecond))
			}
		}
	}
	r.compare()
	r.Verdicts = judge(r.Results)
	return r, nil
}

// labelled runs f with the profiler label target=name.
func labelled(ctx context.Context, name string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("target", name), f)
}

// measure measures one cell: scenario sc at concurrency c on each of
// targets, in opts.Rounds rounds in which the targets take turns, each turn
// Duration/Rounds long. Each target is warmed up before its first turn.
// reset is false when the process's peak RSS could not be reset.
func (g *generator) measure(ctx context.Context, sc Scenario, c int, targets []*target, opts Options) (_ []Result, reset bool) {
	type tally struct {
		newCaller func() caller
		l         load
		peak      int64
	}
	tallies := make([]tally, len(targets))
	for i, t := range targets {
		tallies[i].newCaller = g.callers(sc, t)
	}
	turn := opts.Duration / time.Duration(opts.Rounds)
	reset = true
	for round := range opts.Rounds {
		for i := range targets {
			tl := &tallies[i]
			if round == 0 {
				drive(ctx, c, opts.Warmup, tl.newCaller)
			}
			// The previous turns' garbage is collected and its memory handed
			// back, so that this turn's peak RSS is its own.
			runtime.GC()
			debug.FreeOSMemory()
			reset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil && reset
			var l load
			labelled(ctx, "generator", func(ctx context.Context) { l = drive(ctx, c, turn, tl.newCaller) })
			tl.l.add(l)
			tl.peak = max(tl.peak, peakRSS())
			if ctx.Err() != nil {
				return nil, reset
			}
		}
	}
	results := make([]Result, len(targets))
	for i, t := range targets {
		l := tallies[i].l
		slices.Sort(l.latencies)
		res := Result{
			Scenario:          sc,
			Target:            t.name,
			Concurrency:       c,
			Requests:          l.ok,
			Errors:            l.errors,
			Seconds:           l.elapsed.Seconds(),
			RequestsPerSecond: float64(l.ok) / l.elapsed.Seconds(),
			P50:               percentile(l.latencies, 50),
			P99:               percentile(l.latencies, 99),
			PeakRSS:           tallies[i].peak,
		}
		if n := l.ok + l.errors; n > 0 {
			res.AllocsPerRequest = float64(l.mallocs) / float64(n)
		}
		if l.firstError != nil {
			res.FirstError = l.firstError.Error()
		}
		results[i] = res
	}
	return results, reset
}

// peakRSS returns the process's resident high-water mark (VmHWM) in bytes,
// or 0 where /proc does not say.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
