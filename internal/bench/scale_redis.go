package bench

import (
	"context"
	"fmt"
	"time"
)

// runRedis runs [RunReplicas] at concurrency 64: the embedded store and one
// Redis replica at size 1, the largest size's replicas on one Redis.
func runRedis(ctx context.Context, opts ScaleOptions, cr *CurveReport) error {
	sizes := opts.Sizes[CurveRedis]
	if sizes[0] != 1 || len(sizes) > 2 {
		return fmt.Errorf("sizes %v: want 1 and, optionally, a number of replicas", sizes)
	}
	started := time.Now()
	pctx, cancel := context.WithTimeout(ctx, opts.PointTimeout)
	defer cancel()
	replicas := sizes[len(sizes)-1]
	ro := ReplicaOptions{RedisURL: opts.RedisURL, Duration: opts.Measure, Concurrency: 64, Replicas: max(replicas, 2), Progress: opts.Progress}
	r, err := RunReplicas(pctx, ro)
	if err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Errors > 0 {
			return fmt.Errorf("%d × %s: %d errors, the first: %s", res.Replicas, res.Store, res.Errors, res.FirstError)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	emb, one, many := r.Results[0], r.Results[1], r.Results[2]
	p := Point{Size: 1}
	p.set("redis_sends_per_s", one.RequestsPerSecond)
	p.set("redis_p99_ms", ms(one.P99))
	p.set("embedded_sends_per_s", emb.RequestsPerSecond)
	p.set("embedded_p99_ms", ms(emb.P99))
	p.set("redis_vs_embedded", r.RedisVsEmbedded)
	addPoint(opts, cr, p, started)
	if len(sizes) == 2 {
		p := Point{Size: replicas}
		p.set("redis_sends_per_s", many.RequestsPerSecond)
		p.set("redis_p99_ms", ms(many.P99))
		addPoint(opts, cr, p, started)
	}
	return nil
}
