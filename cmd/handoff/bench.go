package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/handoff-a2a/handoff/internal/bench"
)

const benchSynopsis = "[--duration D] [--concurrency 1,16,64] [--scenarios send,stream,get,grpc] [--json] [--no-targets]"

// runBench measures Handoff against a2a-go's own server and a fixed-answer
// HTTP handler, all in this process, and checks the goals of
// internal/bench: missing one is an error unless --no-targets.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", benchSynopsis, stdout)
	duration := fs.Duration("duration", bench.DefaultDuration, "measured `time` of each cell (one scenario, concurrency and target)")
	concurrency := fs.String("concurrency", "1,16,64", "comma-separated `counts` of concurrent requests")
	scenarios := fs.String("scenarios", "send,stream,get,grpc", "comma-separated `names` of the scenarios to run")
	asJSON := fs.Bool("json", false, "print one JSON document instead of the tables")
	noTargets := fs.Bool("no-targets", false, "exit 0 even when Handoff misses a goal")
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
	opts := bench.Options{Duration: *duration, Progress: stderr}
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

	report, err := bench.Run(ctx, opts)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("bench: interrupted; nothing to report")
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
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
