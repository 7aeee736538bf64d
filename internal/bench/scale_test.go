package bench_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/bench"
)

// TestRunScaleSmoke runs every curve at tiny sizes and checks each point was
// measured with every figure, the targets were judged, and the table and
// JSON are written.
func TestRunScaleSmoke(t *testing.T) {
	needRedis(t)
	var progress bytes.Buffer
	r, err := bench.RunScale(t.Context(), bench.ScaleOptions{
		Sizes: map[bench.Curve][]int{
			bench.CurveEvents:      {10, 200},
			bench.CurveTasks:       {200, 1000},
			bench.CurveSubscribers: {2, 20},
			bench.CurveCatalog:     {10, 50},
			bench.CurveRedis:       {1, 2},
			bench.CurveDelegation:  {1, 4},
			bench.CurveArtifact:    {1 << 10, 1 << 20},
			bench.CurvePush:        {1, 64}, // both sizes its goals read
		},
		Measure:      100 * time.Millisecond,
		PointTimeout: time.Minute,
		Progress:     &progress,
	})
	if err != nil {
		t.Fatalf("RunScale() error = %v\nprogress:\n%s", err, progress.String())
	}
	want := map[bench.Curve][]string{
		bench.CurveEvents:      {"status.append_us", "status.bytes_per_event", "status.get10_us", "artifact.append_us", "artifact.bytes_per_event"},
		bench.CurveTasks:       {"startup_ms", "get_us", "list_state_us", "list_context_us"},
		bench.CurveSubscribers: {"fanout_p99_ms", "bare_fanout_p99_ms"}, // memory per stream is noise at 2
		bench.CurveCatalog:     {"publish_ms", "search_ms"},
		bench.CurveRedis:       {"redis_sends_per_s"},
		bench.CurveDelegation:  {"direct_p50_ms", "delegated_p50_ms", "delegated_p99_ms", "verifier_p50_ms", "verifier_calls_per_send"},
		bench.CurveArtifact:    {"copy_s", "direct_s", "delegated_s", "delegated_peak_rss_above_idle_mib", "delegated_vs_copy"},
		bench.CurvePush:        {"deliveries_per_s", "bare_posts_per_s", "vs_bare", "delivery_p99_ms"},
	}
	if len(r.Curves) != len(bench.Curves()) {
		t.Fatalf("RunScale() measured %d curves, want %d", len(r.Curves), len(bench.Curves()))
	}
	for _, c := range r.Curves {
		if len(c.Points) != 2 {
			t.Errorf("%s: %d points, want 2", c.Curve, len(c.Points))
		}
		for _, p := range c.Points {
			if p.Note != "" {
				t.Errorf("%s n=%d: %s", c.Curve, p.Size, p.Note)
			}
			for _, m := range want[c.Curve] {
				if v, ok := p.Metrics[m]; !ok || v <= 0 {
					t.Errorf("%s n=%d: %s = %v, %v; want a positive figure", c.Curve, p.Size, m, v, ok)
				}
			}
		}
	}
	if len(r.Verdicts) != len(bench.ScaleGoals()) {
		t.Errorf("%d verdicts, want one per goal (%d)", len(r.Verdicts), len(bench.ScaleGoals()))
	}
	for _, v := range r.Verdicts {
		// The tiny run has no point at 1000 subscribers, and no optional curve.
		wantNot := strings.Contains(v.Goal, "at 1000") || strings.HasPrefix(v.Goal, string(bench.CurveRetention)+":")
		if (v.Status == bench.NotMeasured) != wantNot {
			t.Errorf("goal %q: status %s", v.Goal, v.Status)
		}
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"events:", "tasks:", "subscribers:", "catalog:", "redis:", "push:", "×base", "Goals:"} {
		if !strings.Contains(table.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, table.String())
		}
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("json.Marshal(report) error = %v", err)
	}
	t.Logf("\n%s\nprogress:\n%s", table.String(), progress.String())
}

// TestRunScaleRetentionSmoke runs the retention curve for 3 windows of 1s
// and checks each sample has every figure, tasks were stored and purged on
// both stores, and the plateau targets were judged.
func TestRunScaleRetentionSmoke(t *testing.T) {
	needRedis(t)
	var progress bytes.Buffer
	r, err := bench.RunScale(t.Context(), bench.ScaleOptions{
		Curves:       []bench.Curve{bench.CurveRetention},
		Retention:    bench.RetentionOptions{Duration: 4 * time.Second, Window: time.Second, Rate: 1200, Sample: time.Second},
		PointTimeout: 30 * time.Second,
		Progress:     &progress,
	})
	if err != nil {
		t.Fatalf("RunScale() error = %v\nprogress:\n%s", err, progress.String())
	}
	if len(r.Curves) != 1 || len(r.Curves[0].Points) < 3 {
		t.Fatalf("RunScale() curves %+v, want one curve of at least 3 samples\nprogress:\n%s", r.Curves, progress.String())
	}
	c := r.Curves[0]
	for _, p := range c.Points {
		if p.Note != "" {
			t.Errorf("t=%ds: %s", p.Size, p.Note)
		}
		for _, m := range []string{"embedded.dir_bytes", "embedded.db_bytes", "embedded.tasks", "redis.used_memory_bytes", "redis.ns_memory_bytes", "redis.keys", "redis.tasks"} {
			if v, ok := p.Metrics[m]; !ok || v <= 0 {
				t.Errorf("t=%ds: %s = %v, %v; want a positive figure", p.Size, m, v, ok)
			}
		}
	}
	last := c.Points[len(c.Points)-1]
	for _, m := range []string{"embedded.purged", "redis.purged", "embedded.p99_ms", "redis.p99_ms"} {
		if v := last.Metrics[m]; v <= 0 {
			t.Errorf("last sample: %s = %v, want a positive figure", m, v)
		}
	}
	judged := 0
	for _, v := range r.Verdicts {
		if strings.HasPrefix(v.Goal, "retention:") {
			judged++
			if v.Status == bench.NotMeasured {
				t.Errorf("goal %q not measured", v.Goal)
			}
		}
	}
	if judged != 4 {
		t.Errorf("%d retention goals judged, want 4", judged)
	}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\nprogress:\n%s", table.String(), progress.String())
}

func TestRunScaleRefusesBadSizes(t *testing.T) {
	for _, sizes := range [][]int{{0, 10}, {10, 10}, {100, 10}} {
		_, err := bench.RunScale(t.Context(), bench.ScaleOptions{Curves: []bench.Curve{bench.CurveEvents}, Sizes: map[bench.Curve][]int{bench.CurveEvents: sizes}})
		if err == nil || !strings.Contains(err.Error(), "increasing sizes") {
			t.Errorf("RunScale with sizes %v: err = %v, want the sizes refused", sizes, err)
		}
	}
	if _, err := bench.RunScale(t.Context(), bench.ScaleOptions{Curves: []bench.Curve{"disk"}}); err == nil || !strings.Contains(err.Error(), `unknown curve "disk"`) {
		t.Errorf("RunScale with curve disk: err = %v, want it refused", err)
	}
}

// BenchmarkScale runs each curve of handoff bench --scale at its default
// sizes, one sub-benchmark per curve:
//
//	go test -run '^$' -bench 'Scale/events' -benchtime 1x -timeout 20m ./internal/bench
func BenchmarkScale(b *testing.B) {
	for _, c := range bench.Curves() {
		b.Run(string(c), func(b *testing.B) {
			if c == bench.CurveRedis {
				needRedis(b)
			}
			var r *bench.ScaleReport
			for b.Loop() {
				var err error
				if r, err = bench.RunScale(b.Context(), bench.ScaleOptions{Curves: []bench.Curve{c}}); err != nil {
					b.Fatal(err)
				}
			}
			var table bytes.Buffer
			if err := r.WriteTable(&table); err != nil {
				b.Fatal(err)
			}
			b.Logf("\n%s", table.String())
			b.ReportMetric(float64(len(r.Missed())), "missed-targets")
		})
	}
}
