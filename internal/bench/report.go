package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Result is one cell: one scenario at one concurrency on one target.
type Result struct {
	Scenario    Scenario `json:"scenario"`
	Target      string   `json:"target"`
	Concurrency int      `json:"concurrency"`
	// Requests were answered correctly; Errors failed or got a wrong answer.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// FirstError describes the cell's first error.
	FirstError string `json:"first_error,omitempty"`
	// Seconds is how long the cell ran, to its last answer.
	Seconds           float64 `json:"seconds"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	// P50 and P99 are latencies of the correctly answered requests.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// AllocsPerRequest is the whole process's heap allocations per request:
	// the load generator's and the target's.
	AllocsPerRequest float64 `json:"allocs_per_request"`
	// TargetAllocsPerRequest is AllocsPerRequest minus the limit's in the
	// same cell, which are the generator's (plus a trivial handler's): the
	// target's own share. Not set on the limit's results.
	TargetAllocsPerRequest float64 `json:"target_allocs_per_request,omitempty"`
	// PeakRSS is the process's resident high-water mark during the target's
	// turns in the cell, in bytes; see [Report.PeakRSSReset].
	PeakRSS int64 `json:"peak_rss_bytes"`
	// VsSDK and VsLimit are Handoff's throughput over the SDK's and over the
	// limit's in the same cell; set on Handoff's results only.
	VsSDK   float64 `json:"throughput_vs_sdk,omitempty"`
	VsLimit float64 `json:"throughput_vs_limit,omitempty"`
}

// Report is what a [Run] measured.
type Report struct {
	Started   time.Time `json:"started"`
	GoVersion string    `json:"go_version"`
	Platform  string    `json:"platform"`
	// CPUs is GOMAXPROCS: the generator and the targets share these.
	CPUs int `json:"cpus"`
	// Config says which agent config Handoff served.
	Config   string        `json:"handoff_config"`
	Duration time.Duration `json:"duration_per_cell_ns"`
	Warmup   time.Duration `json:"warmup_per_cell_ns"`
	// Rounds is how many turns each target took in each cell.
	Rounds int `json:"rounds_per_cell"`
	// PeakRSSReset is whether the peak RSS was reset before each turn. If
	// not, each cell's peak is the process's since it started.
	PeakRSSReset bool      `json:"peak_rss_reset_per_cell"`
	Results      []Result  `json:"results"`
	Verdicts     []Verdict `json:"goals"`
}

// compare fills in the figures that relate a cell's targets to each other.
func (r *Report) compare() {
	for i := range r.Results {
		res := &r.Results[i]
		if res.Target == TargetLimit {
			continue
		}
		if limit := r.find(res.Scenario, res.Concurrency, TargetLimit); limit != nil {
			res.TargetAllocsPerRequest = res.AllocsPerRequest - limit.AllocsPerRequest
			if res.Target == TargetHandoff {
				res.VsLimit = ratio(res.RequestsPerSecond, limit.RequestsPerSecond)
			}
		}
		if sdk := r.find(res.Scenario, res.Concurrency, TargetSDK); sdk != nil && res.Target == TargetHandoff {
			res.VsSDK = ratio(res.RequestsPerSecond, sdk.RequestsPerSecond)
		}
	}
}

func (r *Report) find(sc Scenario, concurrency int, target string) *Result {
	for i, res := range r.Results {
		if res.Scenario == sc && res.Concurrency == concurrency && res.Target == target {
			return &r.Results[i]
		}
	}
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Metric is what a [Goal] compares.
type Metric string

const (
	// Throughput goals want Handoff's requests per second at least Factor
	// times the other target's.
	Throughput Metric = "throughput"
	// P99 goals want Handoff's 99th percentile latency at most Factor times
	// the other target's.
	P99 Metric = "p99"
)

// A Goal is a figure Handoff should reach in one cell, relative to another
// target in the same cell.
type Goal struct {
	Scenario    Scenario
	Concurrency int
	Metric      Metric
	Than        string // TargetSDK or TargetLimit
	Factor      float64
}

// String says the goal in words.
func (g Goal) String() string {
	op := "≥"
	if g.Metric == P99 {
		op = "≤"
	}
	than := map[string]string{TargetSDK: "SDK", TargetLimit: "limit"}[g.Than]
	return fmt.Sprintf("%s at concurrency %d: Handoff's %s %s %g× the %s's", g.Scenario, g.Concurrency, g.Metric, op, g.Factor, than)
}

// Goals returns what a run checks: the targets of the issue "Measured
// speed", Handoff on its durable store against the SDK in memory.
func Goals() []Goal {
	return []Goal{
		{Send, 64, Throughput, TargetSDK, 3},
		{Send, 64, Throughput, TargetLimit, 0.3},
		{Send, 64, P99, TargetSDK, 0.5},
		{Get, 64, Throughput, TargetLimit, 0.5},
		{Stream, 16, Throughput, TargetSDK, 3},
	}
}

// The statuses of a [Verdict].
const (
	Met         = "met"
	Missed      = "missed"
	NotMeasured = "not measured" // the run did not include the goal's cell
)

// Verdict is how a run did on one [Goal].
type Verdict struct {
	Goal   string `json:"goal"`
	Status string `json:"status"`
	// Ratio is Handoff's figure over the other target's.
	Ratio float64 `json:"ratio,omitempty"`
	// Note says why a goal with errors in its cell counts as missed.
	Note string `json:"note,omitempty"`
}

func judge(results []Result) []Verdict {
	r := &Report{Results: results}
	var verdicts []Verdict
	for _, g := range Goals() {
		v := Verdict{Goal: g.String(), Status: NotMeasured}
		h, o := r.find(g.Scenario, g.Concurrency, TargetHandoff), r.find(g.Scenario, g.Concurrency, g.Than)
		if h != nil && o != nil {
			met := false
			switch g.Metric {
			case Throughput:
				v.Ratio = ratio(h.RequestsPerSecond, o.RequestsPerSecond)
				met = v.Ratio >= g.Factor
			case P99:
				v.Ratio = ratio(float64(h.P99), float64(o.P99))
				met = v.Ratio <= g.Factor
			}
			v.Status = Missed
			if met {
				v.Status = Met
			}
			// A figure from a cell with errors is no evidence either way.
			if n := h.Errors + o.Errors; n > 0 {
				v.Status = Missed
				v.Note = fmt.Sprintf("%d errors in the cell", n)
			}
		}
		verdicts = append(verdicts, v)
	}
	return verdicts
}

// Missed returns the goals the run did not reach.
func (r *Report) Missed() []Verdict {
	var missed []Verdict
	for _, v := range r.Verdicts {
		if v.Status == Missed {
			missed = append(missed, v)
		}
	}
	return missed
}

// String says the goal and the measured ratio, without the status.
func (v Verdict) String() string {
	s := v.Goal
	if v.Status != NotMeasured {
		s += fmt.Sprintf(" (measured %.2f×)", v.Ratio)
	}
	if v.Note != "" {
		s += ": " + v.Note
	}
	return s
}

// WriteTable writes the report for people: a table per scenario, the
// goals, and what the memory columns mean.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "handoff bench: %s %s, %d CPUs, %s per cell in %d turns per target after %s of warm-up; Handoff's config: %s\n",
		r.GoVersion, r.Platform, r.CPUs, r.Duration, r.Rounds, r.Warmup, r.Config)
	var scenarios []Scenario
	for _, res := range r.Results {
		if len(scenarios) == 0 || scenarios[len(scenarios)-1] != res.Scenario {
			scenarios = append(scenarios, res.Scenario)
		}
	}
	for _, sc := range scenarios {
		fmt.Fprintf(ew, "\n%s: %s\n", sc, sc.title())
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "target\tconc\treq/s\tp50\tp99\terrors\tallocs/req\tpeak RSS\t×SDK\t×limit\t")
		var concurrencies []int
		for _, res := range r.Results {
			if res.Scenario == sc && !slices.Contains(concurrencies, res.Concurrency) {
				concurrencies = append(concurrencies, res.Concurrency)
			}
		}
		for _, c := range concurrencies {
			for _, name := range []string{TargetHandoff, TargetSDK, TargetLimit} {
				res := r.find(sc, c, name)
				if res == nil {
					continue
				}
				allocs := fmt.Sprintf("(%.0f)", res.AllocsPerRequest)
				if res.Target != TargetLimit {
					allocs = fmt.Sprintf("%.0f", res.TargetAllocsPerRequest)
				}
				fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%d\t%s\t%.1f MiB\t%s\t%s\t\n",
					res.Target, res.Concurrency, res.RequestsPerSecond, fmtDuration(res.P50), fmtDuration(res.P99),
					res.Errors, allocs, float64(res.PeakRSS)/(1<<20), fmtRatio(res.VsSDK), fmtRatio(res.VsLimit))
			}
		}
		tw.Flush()
		for _, res := range r.Results {
			if res.Scenario == sc && res.FirstError != "" {
				fmt.Fprintf(ew, "  first error of %s at concurrency %d: %s\n", res.Target, res.Concurrency, res.FirstError)
			}
		}
	}
	fmt.Fprintln(ew, "\nGoals:")
	for _, v := range r.Verdicts {
		fmt.Fprintf(ew, "  %-12s %s\n", v.Status, v)
	}
	peak := "reset before each turn"
	if !r.PeakRSSReset {
		peak = "NOT reset between cells (no /proc/self/clear_refs): the process's peak so far"
	}
	fmt.Fprintf(ew, "\nThe load generator and the three targets share one process. allocs/req: the process's heap\n"+
		"allocations per request minus the limit's in the same cell, i.e. net of the generator's; the limit's\n"+
		"row shows, in parentheses, that baseline itself. peak RSS: the process's high-water mark during the\n"+
		"target's turns, %s, with all three targets resident. ×SDK, ×limit: Handoff's req/s over theirs.\n", peak)
	return ew.err
}

// errWriter keeps the first write error, so the table code can print freely.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	_, e.err = e.w.Write(p)
	return len(p), nil
}

func fmtRatio(x float64) string {
	if x == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", x)
}

func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
