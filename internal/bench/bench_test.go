package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/bench"
)

// TestRunSmoke runs every scenario briefly against the three real targets
// and checks each cell was measured, without errors.
func TestRunSmoke(t *testing.T) {
	var progress bytes.Buffer
	r, err := bench.Run(t.Context(), bench.Options{
		Duration:    100 * time.Millisecond,
		Warmup:      20 * time.Millisecond,
		Concurrency: []int{1, 4},
		Progress:    &progress,
	})
	if err != nil {
		t.Fatalf("Run() error = %v\nprogress:\n%s", err, progress.String())
	}
	targets := []string{bench.TargetLimit, bench.TargetSDK, bench.TargetHandoff}
	if want := len(bench.Scenarios()) * 2 * len(targets); len(r.Results) != want {
		t.Fatalf("Run() gave %d results, want %d", len(r.Results), want)
	}
	i := 0
	for _, sc := range bench.Scenarios() {
		for _, c := range []int{1, 4} {
			for _, target := range targets {
				res := r.Results[i]
				i++
				if res.Scenario != sc || res.Concurrency != c || res.Target != target {
					t.Errorf("result %d is %s c=%d %s, want %s c=%d %s", i, res.Scenario, res.Concurrency, res.Target, sc, c, target)
				}
				if res.Errors != 0 || res.Requests == 0 || res.RequestsPerSecond <= 0 || res.P99 < res.P50 || res.P50 <= 0 {
					t.Errorf("%s c=%d %s: %d requests (%.0f/s), %d errors (%s), p50 %v p99 %v",
						sc, c, target, res.Requests, res.RequestsPerSecond, res.Errors, res.FirstError, res.P50, res.P99)
				}
				if target == bench.TargetHandoff && (res.VsSDK <= 0 || res.VsLimit <= 0) {
					t.Errorf("%s c=%d: Handoff's ratios are %v (SDK) and %v (limit), want both set", sc, c, res.VsSDK, res.VsLimit)
				}
			}
		}
	}
	// The goals' cells (concurrency 16 and 64) were not run.
	if len(r.Verdicts) != len(bench.Goals()) || len(r.Missed()) != 0 {
		t.Errorf("verdicts = %v, want all %d not measured", r.Verdicts, len(bench.Goals()))
	}
	if got := strings.Count(progress.String(), "\n"); got != len(r.Results) {
		t.Errorf("progress has %d lines, want one per cell (%d):\n%s", got, len(r.Results), progress.String())
	}

	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"send: blocking SendMessage", "stream:", "get:", "grpc:", "handoff", "sdk", "limit", "Goals:", "not measured"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("json.Marshal(report) error = %v", err)
	}
	t.Logf("\n%s", table.String())
}
