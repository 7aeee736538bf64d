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

	"github.com/handoff-a2a/handoff/internal/bench"
)

const benchSynopsis = "[--duration D] [--rounds N] [--concurrency 1,16,64] [--scenarios send,stream,get,grpc] [--json] [--no-targets] [--cpuprofile FILE] [--memprofile FILE]"

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
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("bench: unexpected argument %q", rest[0])
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
