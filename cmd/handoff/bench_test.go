package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/internal/bench"
)

func TestBenchJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runBench(t.Context(), []string{"--duration", "50ms", "--rounds", "2", "--concurrency", "2", "--scenarios", "get", "--json", "--no-targets"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench error = %v\nstderr:\n%s", err, stderr.String())
	}
	var r bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("bench --json printed no JSON document: %v\n%s", err, stdout.String())
	}
	if len(r.Results) != 3 || r.Rounds != 2 {
		t.Fatalf("bench --json gave %d results in %d rounds, want one per target (3) in 2", len(r.Results), r.Rounds)
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
		{"--rounds", "0"},
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

// TestBenchProfiles checks that --cpuprofile and --memprofile write
// profiles, and that a profile that cannot be created fails the command.
func TestBenchProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	args := []string{"--duration", "50ms", "--concurrency", "2", "--scenarios", "send", "--no-targets", "--cpuprofile", cpu, "--memprofile", mem}
	var stderr bytes.Buffer
	if err := runBench(t.Context(), args, new(bytes.Buffer), &stderr); err != nil {
		t.Fatalf("bench error = %v\nstderr:\n%s", err, stderr.String())
	}
	for _, f := range []string{cpu, mem} {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		// A pprof profile is a gzipped protocol buffer.
		z, err := gzip.NewReader(r)
		var n int64
		if err == nil {
			n, err = io.Copy(io.Discard, z)
		}
		r.Close()
		if err != nil || n == 0 {
			t.Errorf("%s: %d bytes after gzip, err %v; want a profile", filepath.Base(f), n, err)
		}
	}
	err := runBench(t.Context(), []string{"--duration", "50ms", "--scenarios", "get", "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.prof")}, new(bytes.Buffer), new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "create the CPU profile") {
		t.Errorf("bench with an unwritable --cpuprofile: err = %v, want the failed create", err)
	}
}

// TestBenchScaleJSON runs one curve of bench --scale at tiny sizes and
// reads its JSON report.
func TestBenchScaleJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--scale", "--curves", "tasks", "--sizes", "tasks=50,100", "--measure", "50ms", "--json", "--no-targets"}
	if err := runBench(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench --scale error = %v\nstderr:\n%s", err, stderr.String())
	}
	var r bench.ScaleReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("bench --scale --json printed no JSON document: %v\n%s", err, stdout.String())
	}
	if len(r.Curves) != 1 || r.Curves[0].Curve != bench.CurveTasks || len(r.Curves[0].Points) != 2 {
		t.Fatalf("bench --scale gave %+v, want the tasks curve at 2 sizes", r.Curves)
	}
	for i, p := range r.Curves[0].Points {
		if p.Size != []int{50, 100}[i] || p.Metrics["get_us"] <= 0 || p.Metrics["startup_ms"] <= 0 {
			t.Errorf("point %d = %+v, want size %d with get_us and startup_ms", i, p, []int{50, 100}[i])
		}
	}
	if got := strings.Count(stderr.String(), "bench scale: tasks n="); got != 2 {
		t.Errorf("stderr has %d point lines, want 2:\n%s", got, stderr.String())
	}
	// Without --no-targets a missed target fails the command, naming it;
	// a run that missed none exits 0.
	stdout.Reset()
	stderr.Reset()
	err := runBench(t.Context(), args[:len(args)-1], &stdout, &stderr)
	if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
		t.Fatalf("bench --scale --json printed no JSON document: %v\n%s", jerr, stdout.String())
	}
	if missed := r.Missed(); len(missed) > 0 {
		if err == nil || !strings.Contains(stderr.String(), "bench: target missed: "+missed[0].String()) {
			t.Errorf("bench --scale with missed targets %v: err = %v, stderr:\n%s\nwant an error naming them", missed, err, stderr.String())
		}
	} else if err != nil {
		t.Errorf("bench --scale with every target met: err = %v", err)
	}
}

func TestBenchScaleUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--scale", "--curves", "events,disk"},
		{"--scale", "--sizes", "events"},
		{"--scale", "--sizes", "events=10,5"},
		{"--scale", "--sizes", "disk=1,2"},
		{"--scale", "--curves", "tasks", "--sizes", "events=1,2"},
		{"--scale", "--measure", "0s"},
		{"--scale", "--point-timeout", "-1s"},
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
	for _, s := range []string{"handoff bench --scale", "--curves", "--sizes CURVE=N,N,...", "events=10,100,1000,10000,100000", "--point-timeout"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("bench --help lacks %q:\n%s", s, stdout.String())
		}
	}
}
