package bench_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/bench"
)

// TestRunScalePush runs the push curve at small sizes: every event reaches
// its webhook exactly once, and both Handoff's and the bare client's
// figures are measured.
func TestRunScalePush(t *testing.T) {
	var progress bytes.Buffer
	r, err := bench.RunScale(t.Context(), bench.ScaleOptions{
		Curves:       []bench.Curve{bench.CurvePush},
		Sizes:        map[bench.Curve][]int{bench.CurvePush: {1, 8}},
		Measure:      100 * time.Millisecond,
		PointTimeout: time.Minute,
		Progress:     &progress,
	})
	if err != nil {
		t.Fatalf("RunScale() error = %v\nprogress:\n%s", err, progress.String())
	}
	if len(r.Curves) != 1 || len(r.Curves[0].Points) != 2 {
		t.Fatalf("RunScale() = %+v, want one curve of two points\nprogress:\n%s", r.Curves, progress.String())
	}
	for _, p := range r.Curves[0].Points {
		if p.Failed || p.Note != "" {
			t.Errorf("n=%d: failed %v: %s", p.Size, p.Failed, p.Note)
		}
		for _, m := range []string{"deliveries_per_s", "bare_posts_per_s", "vs_bare", "delivery_p50_ms", "delivery_p99_ms", "bare_p50_ms", "bare_p99_ms"} {
			if v := p.Metrics[m]; v <= 0 {
				t.Errorf("n=%d: %s = %v, want a positive figure", p.Size, m, v)
			}
		}
		if got := p.Metrics["posts_per_delivery"]; got != 1 {
			t.Errorf("n=%d: posts_per_delivery = %v, want 1: each event sent once", p.Size, got)
		}
	}
	var measured int
	for _, v := range r.Verdicts {
		if v.Status != bench.NotMeasured {
			measured++
		}
	}
	if measured != 1 { // the goal at 1; the run has no point at 64
		t.Errorf("%d goals judged, want 1: %v", measured, r.Verdicts)
	}
}
