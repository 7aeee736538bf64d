package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// A Curve is one dimension of the work a scale run grows, to see how
// Handoff's cost grows with it.
type Curve string

const (
	// CurveEvents grows one task's event log: status updates with a
	// message (its history), and chunks appended to one artifact.
	CurveEvents Curve = "events"
	// CurveTasks grows the number of stored tasks.
	CurveTasks Curve = "tasks"
	// CurveSubscribers grows the idle SSE streams on one task of one agent.
	CurveSubscribers Curve = "subscribers"
	// CurveCatalog grows the MCP tools of the agent's catalog.
	CurveCatalog Curve = "catalog"
	// CurveRedis is blocking sends on one agent on the embedded store, one
	// on Redis and three replicas on one Redis.
	CurveRedis Curve = "redis"
	// CurveDelegation is a delegated blocking send against the same send
	// straight to the peer; size is the concurrency.
	CurveDelegation Curve = "delegation"
	// CurveArtifact is one artifact of growing size streamed in chunks
	// through a delegation; size is its bytes.
	CurveArtifact Curve = "artifact"
	// CurveRetention is a steady workload for minutes on agents that delete
	// finished tasks: the data directory's and Redis's size over time. Not
	// in [Curves]: asked for by name.
	CurveRetention Curve = "retention"
	// CurvePush is push deliveries to a growing number of webhooks, against
	// a bare net/http client posting the same bodies to the same receivers.
	CurvePush Curve = "push"
)

// OptionalCurves returns the curves a scale run measures only when asked.
func OptionalCurves() []Curve {
	return []Curve{CurveRetention}
}

// Curves returns every curve, in the order a scale run measures them.
func Curves() []Curve {
	return []Curve{CurveEvents, CurveTasks, CurveSubscribers, CurveCatalog, CurveRedis, CurvePush, CurveDelegation, CurveArtifact}
}

// DefaultSizes returns the sizes a curve is measured at by default.
func DefaultSizes(c Curve) []int {
	switch c {
	case CurveEvents:
		return []int{10, 100, 1000, 10_000, 100_000}
	case CurveTasks:
		// 10^6 loads in about 30 s here (37,000 appends a second).
		return []int{1000, 10_000, 100_000, 1_000_000}
	case CurveSubscribers:
		// Both ends of each stream are in this process: 10,000 streams take
		// over 20,000 open files, this project's machine's hard limit.
		return []int{10, 100, 1000, 9000}
	case CurveCatalog:
		return []int{10, 100, 1000, 5000}
	case CurveRedis:
		return []int{1, 3}
	case CurveDelegation:
		return []int{1, 16}
	case CurveArtifact:
		// 8 MiB is the largest under the artifact store's 16 MiB limit on
		// an artifact's canonical JSON (base64 makes 16 MiB of raw 22).
		return []int{1 << 10, 1 << 20, 8 << 20, 16 << 20, 64 << 20, 256 << 20}
	case CurvePush:
		return []int{1, 64}
	}
	return nil
}

func (c Curve) title() string {
	switch c {
	case CurveEvents:
		return "events per task: one task on the embedded store, each event its own Append; bytes are what the process wrote (WAL and bbolt)"
	case CurveTasks:
		return "stored tasks, bulk-loaded through Store.Append on the embedded store; GetTask and ListTasks through the engine"
	case CurveSubscribers:
		return "idle SSE streams (SubscribeToTask, JSON-RPC over real HTTP) on one task of one agent; baseline: a bare net/http SSE handler"
	case CurveCatalog:
		return "MCP tools of one server over real HTTP: a new snapshot's publication after the server adds a tool (median of 5; minus: without the MCP SDK's 10ms notification delay), and the model executor's tool search"
	case CurveRedis:
		return "blocking SendMessage at concurrency 64 (conformance agent); size is the number of replicas on Redis"
	case CurveDelegation:
		return "blocking SendMessage to a delegate skill (two agents over real HTTP, the example's contract, its MCP verifier on the front's own MCP server) against the same send straight to the peer, in turns; size is the concurrency; verifier_*: the front's MCP tools/call as its server timed it"
	case CurveArtifact:
		return "one artifact streamed by the peer in 1 MiB raw chunks: to the bench directly, and through a front agent's delegate skill (assembled, stored as blobs, gated); baseline: writing the same bytes to a file on the same disk and syncing it; RSS is the whole process's (both agents), above idle"
	case CurveRetention:
		return "steady blocking SendMessage (~1 KiB) to two conformance agents with retention.finished_tasks set, one on the embedded store, one on Redis; size is the seconds since the load began; purged = answered - stored; *_plateau = max over the last half / max at 2W..3W"
	case CurvePush:
		return "webhooks (HTTP servers on 127.0.0.1), each the push config of a task on the embedded store: a backlog of events delivered (deliveries/s), then one event per task appended 20 times (latency: commit to receipt); baseline: a bare net/http client posting the same bodies to the same receivers"
	}
	return string(c)
}

// DefaultPointTimeout bounds each point of a curve: a point that takes
// longer is reported as far as it got and ends its curve.
const DefaultPointTimeout = 2 * time.Minute

// ScaleOptions configures [RunScale]. The zero value is the default run.
type ScaleOptions struct {
	// Curves lists the curves to measure. Default all of [Curves].
	Curves []Curve
	// Sizes overrides a curve's [DefaultSizes]; the first size of a curve
	// is its baseline.
	Sizes map[Curve][]int
	// PointTimeout bounds each point. Default [DefaultPointTimeout].
	PointTimeout time.Duration
	// Measure is how long a point measures each of its figures, at most.
	// Default 2s.
	Measure time.Duration
	// RedisURL is the Redis of the redis curve. Default
	// redis://127.0.0.1:6379/0, in a namespace of the run's own.
	RedisURL string
	// Retention configures the retention curve.
	Retention RetentionOptions
	// Progress gets a line per point and phase as the run goes. Nil:
	// nothing is written.
	Progress io.Writer
}

func (o ScaleOptions) withDefaults() (ScaleOptions, error) {
	if len(o.Curves) == 0 {
		o.Curves = Curves()
	}
	for _, c := range o.Curves {
		if !slices.Contains(Curves(), c) && !slices.Contains(OptionalCurves(), c) {
			return o, fmt.Errorf("bench scale: unknown curve %q", c)
		}
		if c == CurveRetention {
			if len(o.Sizes[c]) > 0 {
				return o, errors.New("bench scale: the retention curve has no sizes: it takes RetentionOptions")
			}
			var err error
			if o.Retention, err = o.Retention.withDefaults(); err != nil {
				return o, err
			}
		}
	}
	sizes := map[Curve][]int{}
	for _, c := range o.Curves {
		s := o.Sizes[c]
		if len(s) == 0 {
			s = DefaultSizes(c)
		}
		for i, n := range s {
			if n < 1 || (i > 0 && n <= s[i-1]) {
				return o, fmt.Errorf("bench scale: %s sizes %v: want increasing sizes of at least 1", c, s)
			}
		}
		sizes[c] = s
	}
	o.Sizes = sizes
	if o.PointTimeout == 0 {
		o.PointTimeout = DefaultPointTimeout
	}
	if o.Measure == 0 {
		o.Measure = 2 * time.Second
	}
	if o.PointTimeout < 0 || o.Measure < 0 {
		return o, errors.New("bench scale: durations must be positive")
	}
	if o.RedisURL == "" {
		o.RedisURL = "redis://127.0.0.1:6379/0"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return o, nil
}

// A Point is one size of a curve.
type Point struct {
	// Size is how much of the curve's work the point holds.
	Size int `json:"size"`
	// Metrics are the point's figures by name; the name ends with the
	// unit (_us, _ms, _bytes, _per_s).
	Metrics map[string]float64 `json:"metrics"`
	// Seconds is how long the point took, loading included.
	Seconds float64 `json:"seconds"`
	// Note says what was not measured, e.g. a point cut short by its
	// time bound.
	Note string `json:"note,omitempty"`
	// Failed is set when the point ended in an error or ran out of its time
	// bound (Note says which):
	// its curve's targets count as missed.
	Failed bool `json:"failed,omitempty"`

	order []string // of Metrics, as measured
}

// set records a figure of the point.
func (p *Point) set(name string, v float64) {
	if p.Metrics == nil {
		p.Metrics = map[string]float64{}
	}
	if _, ok := p.Metrics[name]; !ok {
		p.order = append(p.order, name)
	}
	p.Metrics[name] = v
}

// CurveReport is one curve's points, smallest (the baseline) first.
type CurveReport struct {
	Curve Curve `json:"curve"`
	// Title says what the curve measures and how.
	Title  string  `json:"title"`
	Points []Point `json:"points"`
	// Metrics lists the metric names in the order the table shows them.
	Metrics []string `json:"metrics"`
}

// ScaleVerdict is how a scale run did on one target.
type ScaleVerdict struct {
	// Goal is the [ScaleGoal] in words.
	Goal string `json:"goal"`
	// Status is Met, Missed or NotMeasured.
	Status string `json:"status"`
	// Measured is the figure the target is about: a ratio (growth from the
	// baseline, or against another target) or an absolute value in Unit.
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	// Note gives the figures behind Measured, or why the goal is missed.
	Note string `json:"note,omitempty"`
}

// String says the goal and the measured figure.
func (v ScaleVerdict) String() string {
	s := v.Goal
	if v.Status != NotMeasured {
		s += fmt.Sprintf(" (measured %s%s)", strconv.FormatFloat(v.Measured, 'f', 2, 64), v.Unit)
	}
	if v.Note != "" {
		s += ": " + v.Note
	}
	return s
}

// ScaleReport is what [RunScale] measured.
type ScaleReport struct {
	Started time.Time `json:"started"`
	// Seconds is how long the whole run took.
	Seconds   float64 `json:"seconds"`
	GoVersion string  `json:"go_version"`
	Platform  string  `json:"platform"`
	// CPUs is GOMAXPROCS: the targets and the load share these.
	CPUs     int            `json:"cpus"`
	Curves   []CurveReport  `json:"curves"`
	Verdicts []ScaleVerdict `json:"goals"`
}

// Missed returns the targets the run did not reach.
func (r *ScaleReport) Missed() []ScaleVerdict {
	var missed []ScaleVerdict
	for _, v := range r.Verdicts {
		if v.Status == Missed {
			missed = append(missed, v)
		}
	}
	return missed
}

// errPointTimeout ends a point that ran out of its time bound.
var errPointTimeout = errors.New("point ran out of its time bound")

// cutShort reports whether err ended a point because the point's own
// bound (pctx's deadline) passed, rather than the run's ctx or a failure.
func cutShort(ctx, pctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && (errors.Is(err, errPointTimeout) || pctx.Err() != nil)
}

// endPoint records p in cr, marked failed when err ended it (cut short by
// its own bound, or failed), and reports whether the curve ends there.
func endPoint(ctx, pctx context.Context, opts ScaleOptions, cr *CurveReport, p Point, started time.Time, err error) bool {
	switch {
	case cutShort(ctx, pctx, err):
		p.Failed, p.Note = true, fmt.Sprintf("cut short after %s: %v", opts.PointTimeout, err)
	case err != nil:
		p.Failed, p.Note = true, fmt.Sprintf("failed: %v", err)
	}
	addPoint(opts, cr, p, started)
	return p.Failed
}

// RunScale measures each curve of opts at each of its sizes, smallest
// first, and judges the targets of [ScaleGoals].
func RunScale(ctx context.Context, opts ScaleOptions) (*ScaleReport, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &ScaleReport{Started: time.Now().UTC(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.GOMAXPROCS(0)}
	dir, err := os.MkdirTemp("", "handoff-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, c := range opts.Curves {
		cr := CurveReport{Curve: c, Title: c.title()}
		fmt.Fprintf(opts.Progress, "bench scale: %s: sizes %v (elapsed %s)\n", c, opts.Sizes[c], time.Since(r.Started).Round(time.Second))
		var err error
		switch c {
		case CurveEvents:
			err = runEvents(ctx, opts, dir, &cr)
		case CurveTasks:
			err = runTasks(ctx, opts, dir, &cr)
		case CurveSubscribers:
			err = runSubscribers(ctx, opts, &cr)
		case CurveCatalog:
			err = runCatalog(ctx, opts, &cr)
		case CurveRedis:
			err = runRedis(ctx, opts, &cr)
		case CurveDelegation:
			err = runDelegation(ctx, opts, dir, &cr)
		case CurveArtifact:
			err = runArtifacts(ctx, opts, dir, &cr)
		case CurveRetention:
			err = runRetention(ctx, opts, dir, &cr)
		case CurvePush:
			err = runPush(ctx, opts, dir, &cr)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("bench scale: %s: %w", c, err)
		}
		r.Curves = append(r.Curves, cr)
	}
	r.Seconds = time.Since(r.Started).Seconds()
	r.Verdicts = judgeScale(r.Curves)
	return r, nil
}

// addPoint records p in cr and says so on progress.
func addPoint(opts ScaleOptions, cr *CurveReport, p Point, started time.Time) {
	p.Seconds = time.Since(started).Seconds()
	for _, name := range p.order {
		if !slices.Contains(cr.Metrics, name) {
			cr.Metrics = append(cr.Metrics, name)
		}
	}
	cr.Points = append(cr.Points, p)
	var b strings.Builder
	for _, name := range cr.Metrics {
		if v, ok := p.Metrics[name]; ok {
			fmt.Fprintf(&b, " %s=%s", name, fmtFigure(v))
		}
	}
	fmt.Fprintf(opts.Progress, "bench scale: %s n=%d:%s (%.1fs)%s\n", cr.Curve, p.Size, b.String(), p.Seconds, noteSuffix(p.Note))
}

func noteSuffix(note string) string {
	if note == "" {
		return ""
	}
	return " — " + note
}

func fmtFigure(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1 || v <= -1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// timed runs f repeatedly for at most d (and at least once, at most max
// times), and returns each run's duration.
func timed(ctx context.Context, d time.Duration, maxRuns int, f func() error) ([]time.Duration, error) {
	var out []time.Duration
	end := time.Now().Add(d)
	for len(out) < maxRuns && (len(out) == 0 || time.Now().Before(end)) {
		if err := ctx.Err(); err != nil {
			return out, errPointTimeout
		}
		t0 := time.Now()
		if err := f(); err != nil {
			return out, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// micros is the median of ds in microseconds.
func micros(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(percentile(s, 50)) / float64(time.Microsecond)
}

// writtenBytes returns how many bytes the process has passed to write
// calls (/proc/self/io wchar): files and sockets alike.
func writtenBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "wchar:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return n
		}
	}
	return 0
}

// raiseFileLimit raises the process's open-file limit to at least n, as far
// as the system allows.
func raiseFileLimit(n uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("get the open-file limit: %w", err)
	}
	if l.Cur >= n {
		return l.Cur, nil
	}
	want := l
	want.Cur = n
	if want.Max < n {
		want.Max = n // allowed with CAP_SYS_RESOURCE only
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		want.Cur, want.Max = l.Max, l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return l.Cur, fmt.Errorf("raise the open-file limit: %w", err)
		}
	}
	return want.Cur, nil
}

// WriteTable writes the report for people: a table per curve, each figure
// with its ratio to the curve's baseline (its first point), then the goals.
func (r *ScaleReport) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "handoff bench --scale: %s %s, %d CPUs, %.0fs\n", r.GoVersion, r.Platform, r.CPUs, r.Seconds)
	for _, c := range r.Curves {
		fmt.Fprintf(ew, "\n%s: %s\n", c.Curve, c.Title)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "size\t")
		for _, m := range c.Metrics {
			fmt.Fprintf(tw, "%s\t×base\t", m)
		}
		fmt.Fprintln(tw, "seconds\t")
		for _, p := range c.Points {
			fmt.Fprintf(tw, "%d\t", p.Size)
			for _, m := range c.Metrics {
				v, ok := p.Metrics[m]
				if !ok {
					fmt.Fprint(tw, "-\t\t")
					continue
				}
				base, ok := c.Points[0].Metrics[m]
				rel := ""
				if ok && base != 0 {
					rel = fmtRatio(v / base)
				}
				fmt.Fprintf(tw, "%s\t%s\t", fmtFigure(v), rel)
			}
			fmt.Fprintf(tw, "%.1f\t\n", p.Seconds)
		}
		tw.Flush()
		for _, p := range c.Points {
			if p.Note != "" {
				fmt.Fprintf(ew, "  n=%d: %s\n", p.Size, p.Note)
			}
		}
	}
	fmt.Fprintln(ew, "\nGoals:")
	for _, v := range r.Verdicts {
		fmt.Fprintf(ew, "  %-12s %s\n", v.Status, v)
	}
	return ew.err
}
