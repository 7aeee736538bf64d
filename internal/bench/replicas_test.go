package bench_test

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/bench"
)

// machineRedis is the Redis the replica runs use, in a namespace of their own.
const machineRedis = "redis://127.0.0.1:6379/0"

func needRedis(tb testing.TB) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
	if err != nil {
		tb.Fatalf("the replica bench needs the machine's Redis on 127.0.0.1:6379: %v", err)
	}
	c.Close()
}

// TestRunReplicasSmoke measures the three setups briefly and checks each
// answered every send, and the ratios follow from the figures.
func TestRunReplicasSmoke(t *testing.T) {
	needRedis(t)
	var progress bytes.Buffer
	r, err := bench.RunReplicas(t.Context(), bench.ReplicaOptions{RedisURL: machineRedis, Duration: 200 * time.Millisecond, Concurrency: 4, Progress: &progress})
	if err != nil {
		t.Fatalf("RunReplicas() error = %v\nprogress:\n%s", err, progress.String())
	}
	want := []struct {
		store    string
		replicas int
	}{{"embedded", 1}, {"redis", 1}, {"redis", 3}}
	if len(r.Results) != len(want) {
		t.Fatalf("RunReplicas() gave %d results, want %d", len(r.Results), len(want))
	}
	for i, w := range want {
		res := r.Results[i]
		if res.Store != w.store || res.Replicas != w.replicas || res.Errors != 0 || res.Requests == 0 || res.P99 < res.P50 {
			t.Errorf("result %d = %d × %s: %d sends, %d errors (%s), p50 %v p99 %v; want %d × %s without errors",
				i, res.Replicas, res.Store, res.Requests, res.Errors, res.FirstError, res.P50, res.P99, w.replicas, w.store)
		}
	}
	if got := r.Results[1].RequestsPerSecond / r.Results[0].RequestsPerSecond; got != r.RedisVsEmbedded {
		t.Errorf("RedisVsEmbedded = %v, want %v", r.RedisVsEmbedded, got)
	}
	if got := r.Results[2].RequestsPerSecond / r.Results[1].RequestsPerSecond; got != r.Scaling {
		t.Errorf("Scaling = %v, want %v", r.Scaling, got)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"1 × embedded", "1 × redis", "3 × redis", "Redis vs embedded", "3 replicas vs one"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
}

// BenchmarkReplicas is the run behind the README's replica figures:
//
//	go test -run '^$' -bench Replicas -benchtime 1x ./internal/bench
func BenchmarkReplicas(b *testing.B) {
	needRedis(b)
	var r *bench.ReplicaReport
	for b.Loop() {
		var err error
		if r, err = bench.RunReplicas(b.Context(), bench.ReplicaOptions{RedisURL: machineRedis, Duration: 5 * time.Second}); err != nil {
			b.Fatal(err)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		b.Fatal(err)
	}
	b.Logf("\n%s", table.String())
	b.ReportMetric(r.Results[0].RequestsPerSecond, "embedded-sends/s")
	b.ReportMetric(r.Results[1].RequestsPerSecond, "redis-sends/s")
	b.ReportMetric(r.Results[2].RequestsPerSecond, "redis3-sends/s")
	b.ReportMetric(r.Scaling, "scaling")
}
