package bench

import "fmt"

// ScaleGoalKind is how a [ScaleGoal] compares its metric.
type ScaleGoalKind string

const (
	// Growth goals want the metric at the curve's largest size at most
	// Limit times its value at the smallest (the baseline).
	Growth ScaleGoalKind = "growth"
	// AtMost goals want the metric at Size at most Limit.
	AtMost ScaleGoalKind = "at most"
	// AtLeast goals want the metric at Size at least Limit.
	AtLeast ScaleGoalKind = "at least"
)

// A ScaleGoal is a target of one curve's metric.
type ScaleGoal struct {
	// Curve and Metric name the figure (a key of [Point].Metrics).
	Curve  Curve
	Metric string
	// Kind is how the figure is compared with Limit.
	Kind ScaleGoalKind
	// Size is the point an AtMost or AtLeast goal reads; 0 is the largest
	// measured.
	Size int
	// Limit is the factor (Growth) or the bound (AtMost, AtLeast).
	Limit float64
	// Unit is Limit's, for AtMost and AtLeast.
	Unit string
}

// String says the goal in words.
func (g ScaleGoal) String() string {
	at := "at the largest size"
	if g.Size > 0 {
		at = fmt.Sprintf("at %d", g.Size)
	}
	switch g.Kind {
	case Growth:
		return fmt.Sprintf("%s: %s at the largest size ≤ %g× its baseline", g.Curve, g.Metric, g.Limit)
	case AtMost:
		return fmt.Sprintf("%s: %s %s ≤ %g%s", g.Curve, g.Metric, at, g.Limit, g.Unit)
	}
	return fmt.Sprintf("%s: %s %s ≥ %g%s", g.Curve, g.Metric, at, g.Limit, g.Unit)
}

// ScaleGoals returns the targets a scale run checks: those of issue 20
// ("Cost that does not grow with the work").
func ScaleGoals() []ScaleGoal {
	return []ScaleGoal{
		{Curve: CurveEvents, Metric: "status.append_us", Kind: Growth, Limit: 1.5},
		{Curve: CurveEvents, Metric: "status.bytes_per_event", Kind: Growth, Limit: 1.5},
		{Curve: CurveEvents, Metric: "artifact.append_us", Kind: Growth, Limit: 1.5},
		{Curve: CurveEvents, Metric: "artifact.bytes_per_event", Kind: Growth, Limit: 1.5},
		{Curve: CurveEvents, Metric: "status.get10_us", Kind: Growth, Limit: 1.5},
		{Curve: CurveTasks, Metric: "get_us", Kind: Growth, Limit: 2},
		{Curve: CurveTasks, Metric: "list_state_us", Kind: Growth, Limit: 2},
		{Curve: CurveTasks, Metric: "list_context_us", Kind: Growth, Limit: 2},
		{Curve: CurveTasks, Metric: "startup_ms", Kind: AtMost, Limit: 2000, Unit: "ms"},
		{Curve: CurveSubscribers, Metric: "heap_per_stream_bytes", Kind: AtMost, Limit: 16 << 10, Unit: " bytes"},
		{Curve: CurveSubscribers, Metric: "fanout_p99_ms", Kind: AtMost, Size: 1000, Limit: 50, Unit: "ms"},
		{Curve: CurveCatalog, Metric: "publish_minus_sdk_delay_ms", Kind: AtMost, Limit: 5, Unit: "ms"},
		{Curve: CurveCatalog, Metric: "search_ms", Kind: AtMost, Limit: 5, Unit: "ms"},
		{Curve: CurveRedis, Metric: "redis_vs_embedded", Kind: AtLeast, Size: 1, Limit: 0.7, Unit: "×"},
		{Curve: CurveArtifact, Metric: "delegated_peak_rss_above_idle_mib", Kind: AtMost, Limit: 64, Unit: " MiB"},
		{Curve: CurveArtifact, Metric: "delegated_vs_copy", Kind: AtMost, Limit: 2, Unit: "×"},
		{Curve: CurveRetention, Metric: "embedded.dir_plateau", Kind: AtMost, Limit: plateauLimit, Unit: "×"},
		{Curve: CurveRetention, Metric: "embedded.db_plateau", Kind: AtMost, Limit: plateauLimit, Unit: "×"},
		{Curve: CurveRetention, Metric: "redis.ns_memory_plateau", Kind: AtMost, Limit: plateauLimit, Unit: "×"},
		{Curve: CurveRetention, Metric: "redis.keys_plateau", Kind: AtMost, Limit: plateauLimit, Unit: "×"},
		{Curve: CurvePush, Metric: "vs_bare", Kind: AtLeast, Size: 1, Limit: 0.5, Unit: "×"},
		{Curve: CurvePush, Metric: "vs_bare", Kind: AtLeast, Size: 64, Limit: 0.5, Unit: "×"},
	}
}

func judgeScale(curves []CurveReport) []ScaleVerdict {
	var out []ScaleVerdict
	for _, g := range ScaleGoals() {
		v := ScaleVerdict{Goal: g.String(), Status: NotMeasured, Unit: g.Unit}
		var cr *CurveReport
		for i := range curves {
			if curves[i].Curve == g.Curve {
				cr = &curves[i]
			}
		}
		if cr == nil || len(cr.Points) == 0 {
			out = append(out, v)
			continue
		}
		var met bool
		measured := false
		switch g.Kind {
		case Growth:
			v.Unit = "×"
			first, last := cr.Points[0], cr.Points[len(cr.Points)-1]
			base, ok1 := first.Metrics[g.Metric]
			top, ok2 := last.Metrics[g.Metric]
			if ok1 && ok2 && len(cr.Points) > 1 && base > 0 {
				v.Measured, measured = top/base, true
				met = v.Measured <= g.Limit
				v.Note = fmt.Sprintf("%s at %d, %s at %d", fmtFigure(base), first.Size, fmtFigure(top), last.Size)
			}
		default:
			var p Point // the largest size measured
			for _, q := range cr.Points {
				if _, ok := q.Metrics[g.Metric]; ok {
					p = q
				}
			}
			if g.Size > 0 {
				p = Point{}
				for _, q := range cr.Points {
					if q.Size == g.Size {
						p = q
					}
				}
			}
			if x, ok := p.Metrics[g.Metric]; ok {
				v.Measured, measured = x, true
				met = x <= g.Limit
				if g.Kind == AtLeast {
					met = x >= g.Limit
				}
				v.Note = fmt.Sprintf("at %d", p.Size)
			}
		}
		if measured {
			v.Status = Missed
			if met {
				v.Status = Met
			}
		}
		for _, p := range cr.Points {
			if p.Failed && v.Status != Missed {
				v.Status, v.Note = Missed, fmt.Sprintf("the point at %d failed", p.Size)
			}
		}
		out = append(out, v)
	}
	return out
}
