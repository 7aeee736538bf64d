package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/internal/bench"
)

func TestBenchJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runBench(t.Context(), []string{"--duration", "50ms", "--concurrency", "2", "--scenarios", "get", "--json", "--no-targets"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench error = %v\nstderr:\n%s", err, stderr.String())
	}
	var r bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("bench --json printed no JSON document: %v\n%s", err, stdout.String())
	}
	if len(r.Results) != 3 {
		t.Fatalf("bench --json gave %d results, want one per target (3)", len(r.Results))
	}
	for _, res := range r.Results {
		if res.Scenario != bench.Get || res.Concurrency != 2 || res.Requests == 0 || res.Errors != 0 {
			t.Errorf("result %+v, want get at concurrency 2 with requests and no errors", res)
		}
	}
	if got := strings.Count(stderr.String(), "bench: ["); got != 3 {
		t.Errorf("stderr has %d progress lines, want 3:\n%s", got, stderr.String())
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--concurrency", "0"},
		{"--concurrency", "1,x"},
		{"--scenarios", "send,rest"},
		{"--duration", "-1s"},
		{"extra"},
	} {
		err := runBench(t.Context(), args, new(bytes.Buffer), new(bytes.Buffer))
		if exitCode(err) != 2 {
			t.Errorf("bench %v: err = %v, want a usage error", args, err)
		}
	}
	var stdout bytes.Buffer
	if err := runBench(t.Context(), []string{"--help"}, &stdout, new(bytes.Buffer)); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("bench --help: err = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(stdout.String(), "--no-targets") {
		t.Errorf("bench --help does not list --no-targets:\n%s", stdout.String())
	}
}
