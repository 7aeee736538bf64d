package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/handoff-a2a/handoff/internal/bench"
)

const benchSynopsis = "[--duration D] [--rounds N] [--concurrency 1,16,64] [--scenarios send,stream,get,grpc] [--json] [--no-targets] [--cpuprofile FILE] [--memprofile FILE]\n" +
	"       handoff bench --scale [--curves events,tasks,subscribers,redis] [--sizes CURVE=N,N,...]... [--measure D] [--point-timeout D] [--redis URL] [--retention-duration D] [--retention-window D] [--retention-rate N] [--retention-sample D] [--json] [--no-targets] [--cpuprofile FILE] [--memprofile FILE]"

// runBench measures Handoff against a2a-go's own server and a fixed-answer
// HTTP handler, all in this process, and checks the goals of
// internal/bench: missing one is an error unless --no-targets.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stdout)
	duration := fs.Duration("duration", bench.DefaultDuration, "measured time `D` of each cell (one scenario, concurrency and target)")
	rounds := fs.Int("rounds", 4, "turns (`N`) each target takes in a cell, the three in turn, each measured for duration/rounds")
	concurrency := fs.String("concurrency", "1,16,64", "comma-separated counts (`N,N,...`) of concurrent requests")
	scenarios := fs.String("scenarios", "send,stream,get,grpc", "comma-separated names (`NAME,...`) of the scenarios to run")
	asJSON := fs.Bool("json", false, "print the report as one line of JSON instead of the tables")
	noTargets := fs.Bool("no-targets", false, "exit 0 even when Handoff misses a goal")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE`; samples carry the label target=handoff, sdk, limit or generator (go tool pprof -tagfocus target=handoff)")
	memProfile := fs.String("memprofile", "", "write an allocation profile of the whole run to `FILE`")
	scale := fs.Bool("scale", false, "measure how the cost grows with the work instead: the curves of --curves, each figure against its curve's smallest size in the same run")
	curves := fs.String("curves", joinCurves(bench.Curves()), "with --scale: comma-separated curves (`NAME,...`) to measure")
	sizes := sizesFlag{}
	fs.Var(sizes, "sizes", "with --scale: the sizes of one curve, smallest (the baseline) first, as `CURVE=N,N,...`; repeat for more curves (default: "+defaultSizes()+")")
	measure := fs.Duration("measure", 2*time.Second, "with --scale: how long (`D`) a point measures each figure, at most")
	pointTimeout := fs.Duration("point-timeout", bench.DefaultPointTimeout, "with --scale: the time bound (`D`) of each point, loading included; a point past it ends its curve")
	retDuration := fs.Duration("retention-duration", 30*time.Minute, "with --scale --curves retention: how long (`D`) the steady workload runs")
	retWindow := fs.Duration("retention-window", time.Minute, "with --scale --curves retention: the agents' retention.finished_tasks (`D`)")
	retRate := fs.Int("retention-rate", 1000, "with --scale --curves retention: blocking sends a minute (`N`) to each agent")
	retSample := fs.Duration("retention-sample", 0, "with --scale --curves retention: how often (`D`) the sizes are read (default: 30s, or half the window if shorter; at least 1s)")
	redisURL := fs.String("redis", "redis://127.0.0.1:6379/0", "with --scale: the Redis (`URL`) of the redis curve, used in a namespace of the run's own")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("bench: unexpected argument %q", rest[0])
	}
	if *scale {
		if *measure <= 0 || *pointTimeout <= 0 {
			return usagef("bench: --measure and --point-timeout must be positive")
		}
		opts := bench.ScaleOptions{Sizes: sizes, Measure: *measure, PointTimeout: *pointTimeout, RedisURL: *redisURL, Progress: stderr,
			Retention: bench.RetentionOptions{Duration: *retDuration, Window: *retWindow, Rate: *retRate, Sample: *retSample}}
		for _, s := range strings.Split(*curves, ",") {
			c := bench.Curve(strings.TrimSpace(s))
			if !slices.Contains(bench.Curves(), c) && !slices.Contains(bench.OptionalCurves(), c) {
				return usagef("bench: --curves: %q is not one of %s", s, joinCurves(append(bench.Curves(), bench.OptionalCurves()...)))
			}
			opts.Curves = append(opts.Curves, c)
		}
		for c := range sizes {
			if !slices.Contains(opts.Curves, c) {
				return usagef("bench: --sizes names curve %s, which --curves does not measure", c)
			}
		}
		return runScale(ctx, opts, *asJSON, *noTargets, *cpuProfile, *memProfile, stdout, stderr)
	}
	if *duration <= 0 {
		return usagef("bench: --duration must be positive")
	}
	if *rounds < 1 {
		return usagef("bench: --rounds must be at least 1")
	}
	opts := bench.Options{Duration: *duration, Rounds: *rounds, Progress: stderr}
	for _, s := range strings.Split(*concurrency, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 {
			return usagef("bench: --concurrency: %q is not a count of at least 1", s)
		}
		opts.Concurrency = append(opts.Concurrency, c)
	}
	for _, s := range strings.Split(*scenarios, ",") {
		sc := bench.Scenario(strings.TrimSpace(s))
		if !slices.Contains(bench.Scenarios(), sc) {
			return usagef("bench: --scenarios: %q is not one of %v", s, bench.Scenarios())
		}
		opts.Scenarios = append(opts.Scenarios, sc)
	}

	stopProfiles, err := startProfiles(*cpuProfile, *memProfile)
	if err != nil {
		return err
	}
	report, err := bench.Run(ctx, opts)
	if perr := stopProfiles(); perr != nil {
		return perr
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("bench: interrupted; nothing to report")
		}
		return err
	}
	if *asJSON {
		err = writeJSONLine(stdout, report)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	missed := report.Missed()
	if len(missed) == 0 || *noTargets {
		return nil
	}
	for _, v := range missed {
		fmt.Fprintf(stderr, "bench: goal missed: %s\n", v)
	}
	return fmt.Errorf("bench: Handoff missed %d of %d goals (--no-targets ignores them)", len(missed), len(report.Verdicts))
}

// startProfiles starts the CPU profile to cpuFile and the allocation profile
// to memFile, either empty for none. The returned stop writes them.
func startProfiles(cpuFile, memFile string) (stop func() error, err error) {
	var cpu *os.File
	if cpuFile != "" {
		if cpu, err = os.Create(cpuFile); err != nil {
			return nil, fmt.Errorf("bench: create the CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(cpu); err != nil {
			return nil, errors.Join(fmt.Errorf("bench: start the CPU profile: %w", err), cpu.Close())
		}
	}
	return func() error {
		var err error
		if cpu != nil {
			pprof.StopCPUProfile()
			if cerr := cpu.Close(); cerr != nil {
				err = fmt.Errorf("bench: write the CPU profile: %w", cerr)
			}
		}
		if memFile == "" {
			return err
		}
		runtime.GC() // the profile then counts every allocation of the run
		f, merr := os.Create(memFile)
		if merr != nil {
			return errors.Join(err, fmt.Errorf("bench: create the memory profile: %w", merr))
		}
		merr = pprof.Lookup("allocs").WriteTo(f, 0)
		return errors.Join(err, wrapErr("bench: write the memory profile", merr), wrapErr("bench: write the memory profile", f.Close()))
	}, nil
}

// wrapErr wraps err, if any, with the failed operation.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// runScale is bench --scale: it runs the curves and checks their targets,
// a missed one an error unless noTargets.
func runScale(ctx context.Context, opts bench.ScaleOptions, asJSON, noTargets bool, cpuProfile, memProfile string, stdout, stderr io.Writer) error {
	stopProfiles, err := startProfiles(cpuProfile, memProfile)
	if err != nil {
		return err
	}
	report, err := bench.RunScale(ctx, opts)
	if perr := stopProfiles(); perr != nil {
		return perr
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("bench: interrupted; nothing to report")
		}
		return err
	}
	if asJSON {
		err = writeJSONLine(stdout, report)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	missed := report.Missed()
	if len(missed) == 0 || noTargets {
		return nil
	}
	for _, v := range missed {
		fmt.Fprintf(stderr, "bench: target missed: %s\n", v)
	}
	return fmt.Errorf("bench --scale: Handoff missed %d of %d targets (--no-targets ignores them)", len(missed), len(report.Verdicts))
}

// sizesFlag is --sizes: CURVE=N,N,... per use.
type sizesFlag map[bench.Curve][]int

func (f sizesFlag) String() string { return "" }

func (f sizesFlag) Set(v string) error {
	name, list, ok := strings.Cut(v, "=")
	c := bench.Curve(strings.TrimSpace(name))
	if !ok || !slices.Contains(bench.Curves(), c) {
		return fmt.Errorf("%q: want CURVE=N,N,... with CURVE one of %s", v, joinCurves(bench.Curves()))
	}
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || (len(sizes) > 0 && n <= sizes[len(sizes)-1]) {
			return fmt.Errorf("%q: want increasing sizes of at least 1", v)
		}
		sizes = append(sizes, n)
	}
	f[c] = sizes
	return nil
}

func joinCurves(cs []bench.Curve) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ",")
}

func defaultSizes() string {
	var parts []string
	for _, c := range bench.Curves() {
		parts = append(parts, fmt.Sprintf("%s=%s", c, strings.Trim(strings.ReplaceAll(fmt.Sprint(bench.DefaultSizes(c)), " ", ","), "[]")))
	}
	return strings.Join(parts, " ")
}
