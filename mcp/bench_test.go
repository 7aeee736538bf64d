package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text"`
}

type echoOut struct {
	Text string `json:"text"`
	Len  int    `json:"len"`
}

// benchServer is one in-memory echo server reached two ways: bare, a go-sdk session of its own,
// and m, a running Manager; version is m's snapshot once the tool is in it.
type benchServer struct {
	bare    *mcpsdk.ClientSession
	m       *mcp.Manager
	version string
}

func newBenchServer(b *testing.B) benchServer {
	b.Helper()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo"}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, echoOut, error) {
		return nil, echoOut{Text: in.Text, Len: len(in.Text)}, nil
	})
	dial := inMemory(srv)
	ct, err := dial()
	if err != nil {
		b.Fatal(err)
	}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bare", Version: "1"}, &mcpsdk.ClientOptions{Capabilities: &mcpsdk.ClientCapabilities{}})
	bare, err := client.Connect(b.Context(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bare.Close() })

	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "mem", Transport: mcp.TransportStdio, Command: "in-memory"}},
		mcp.WithTransportForTest("mem", dial))
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	b.Cleanup(func() { stop(); <-done })
	for {
		updated := m.Updated()
		if _, ok := m.Snapshot().Tool("mem__echo"); ok {
			break
		}
		select {
		case <-updated:
		case <-time.After(10 * time.Second):
			b.Fatalf("server never ready: %+v", m.Servers())
		}
	}
	return benchServer{bare: bare, m: m, version: m.Snapshot().Version}
}

// overhead runs a bare CallTool and then governed once per iteration, interleaved so that
// both see the same machine, and reports their medians and the ratio of the medians.
func (s benchServer) overhead(b *testing.B, governed func() (mcp.Outcome, error)) {
	b.Helper()
	args := map[string]any{"text": "hello"}
	var bareTimes, govTimes []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := s.bare.CallTool(b.Context(), &mcpsdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if o, err := governed(); o != mcp.OutcomeSuccess {
			b.Fatalf("outcome %s: %v", o, err)
		}
		t2 := time.Now()
		bareTimes = append(bareTimes, t1.Sub(t0))
		govTimes = append(govTimes, t2.Sub(t1))
	}
	bp, gp := median(bareTimes), median(govTimes)
	b.ReportMetric(bp, "bare-p50-ns")
	b.ReportMetric(gp, "governed-p50-ns")
	b.ReportMetric(gp/bp, "p50-ratio")
}

// BenchmarkCallOverhead compares Manager.Call with a bare go-sdk CallTool on the same
// in-memory server and reports the ratio of their medians (p50-ratio): what the snapshot
// check, input and output validation, deadline and normalisation cost.
func BenchmarkCallOverhead(b *testing.B) {
	s := newBenchServer(b)
	s.overhead(b, func() (mcp.Outcome, error) {
		r := s.m.Call(b.Context(), mcp.CallRequest{Tool: "mem__echo", SnapshotVersion: s.version,
			Arguments: map[string]any{"text": "hello"}, ReadOnly: true})
		return r.Outcome, r.Err
	})
}

// nopAudit stores nothing: with it the benchmark measures the pipeline's own work.
type nopAudit struct{}

func (nopAudit) Append(_ context.Context, rec *mcp.AuditRecord) error {
	rec.ID = "0"
	return nil
}

func (nopAudit) List(context.Context, mcp.AuditFilter) ([]mcp.AuditRecord, error) { return nil, nil }

// concurrently runs n bare CallTools at once, then n governed calls at once, per iteration,
// and reports the medians of one batch's wall time and their ratio (batch-ratio): what the
// pipeline costs per call when calls overlap, as they do in a busy agent.
func (s benchServer) concurrently(b *testing.B, n int, governed func() (mcp.Outcome, error)) {
	b.Helper()
	args := map[string]any{"text": "hello"}
	batch := func(call func() error) time.Duration {
		errs := make(chan error, n)
		t0 := time.Now()
		for range n {
			go func() { errs <- call() }()
		}
		for range n {
			if err := <-errs; err != nil {
				b.Error(err)
			}
		}
		return time.Since(t0)
	}
	var bareTimes, govTimes []time.Duration
	for b.Loop() {
		bareTimes = append(bareTimes, batch(func() error {
			_, err := s.bare.CallTool(b.Context(), &mcpsdk.CallToolParams{Name: "echo", Arguments: args})
			return err
		}))
		govTimes = append(govTimes, batch(func() error {
			if o, err := governed(); o != mcp.OutcomeSuccess {
				return fmt.Errorf("outcome %s: %v", o, err)
			}
			return nil
		}))
	}
	bp, gp := median(bareTimes), median(govTimes)
	b.ReportMetric(bp/float64(n), "bare-ns/call")
	b.ReportMetric(gp/float64(n), "governed-ns/call")
	b.ReportMetric(gp/bp, "batch-ratio")
}

func median(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2])
}

// BenchmarkPipelineOverhead compares Pipeline.Run with a bare go-sdk CallTool on the same
// in-memory server: the whole governed path (canonical digest, input validation, policy,
// call, output validation, normalisation, result hash, audit record). Sub-benchmarks:
//
//   - audit=nop: the audit log stores nothing, so p50-ratio is the pipeline's own overhead
//     per call, one call at a time (the target: at most 1.25).
//   - audit=bolt: a BoltAudit. One call at a time, each Run waits for its record's own
//     fsync, so p50-ratio measures the disk as much as the pipeline.
//   - audit=bolt/callers=8: a BoltAudit under 8 concurrent calls; batch-ratio compares the
//     wall time of 8 governed calls with 8 bare ones. Group commit lets the 8 records share
//     an fsync, so this is the durable audit's cost per call in a busy agent.
func BenchmarkPipelineOverhead(b *testing.B) {
	bolt := func(b *testing.B) mcp.AuditLog {
		a, err := mcp.OpenBoltAudit(filepath.Join(b.TempDir(), "audit.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Close() })
		return a
	}
	for _, tc := range []struct {
		name    string
		audit   func(b *testing.B) mcp.AuditLog
		callers int
	}{
		{"audit=nop", func(*testing.B) mcp.AuditLog { return nopAudit{} }, 1},
		{"audit=bolt", bolt, 1},
		{"audit=bolt/callers=8", bolt, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := newBenchServer(b)
			p, err := mcp.NewPipeline(s.m, []mcp.Contract{{Tool: "mem__echo", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}}, tc.audit(b))
			if err != nil {
				b.Fatal(err)
			}
			governed := func() (mcp.Outcome, error) {
				r := p.Run(b.Context(), mcp.Proposal{TaskID: "t", Principal: "bob", Tool: "mem__echo",
					SnapshotVersion: s.version, Arguments: map[string]any{"text": "hello"}}, nil)
				if r.AuditErr != nil {
					return mcp.OutcomeProtocolError, r.AuditErr
				}
				return r.Outcome, r.Err
			}
			if tc.callers > 1 {
				s.concurrently(b, tc.callers, governed)
			} else {
				s.overhead(b, governed)
			}
		})
	}
}

// benchRules is 100 rules across the layers, none of which denies the benchmark's call, as
// in a policy shared by many agents and tenants; one in five has a condition.
func benchRules() []policy.Rule {
	var rules []policy.Rule
	for i := range 100 {
		r := policy.Rule{ID: fmt.Sprintf("r%d", i)}
		switch i % 5 {
		case 0:
			r.Layer, r.Tenants, r.Tools = "tenant", []string{fmt.Sprintf("tenant-%d", i)}, []string{"mem__*"}
		case 1:
			r.Layer, r.Paths = "resource", []string{fmt.Sprintf("secret-%d", i)}
		case 2:
			r.Layer, r.Tools, r.When = "ask", []string{"mem__*"}, fmt.Sprintf("args.text == 'x%d'", i)
		case 3:
			r.Layer, r.Principals, r.Tools = "allow", []string{fmt.Sprintf("key:user-%d", i)}, []string{"mem__*"}
		case 4:
			r.Layer, r.Skills, r.Paths = "allow", []string{fmt.Sprintf("skill-%d", i)}, []string{"exports"}
		}
		rules = append(rules, r)
	}
	return rules
}

// BenchmarkPolicyOverhead: what 100 policy rules add to a governed call. Two pipelines on one
// in-memory server, one with the contract alone (the built-in rules only) and one with the
// same contract, a path resource and benchRules, are run in turn in each iteration; it
// reports both medians, and the allocations the rules add per call (policy-allocs, the
// issue's bound: 20). The calls' medians differ by more noise than the rules cost (a call
// through the in-memory server is ~200µs here), so the rules' time is measured apart in the
// same loop: the median of Pipeline.Explain (canonical arguments, resources, decision) with
// the rules less that without (policy-ns, bound: 10µs), and as a share of the call without
// rules (policy-share).
func BenchmarkPolicyOverhead(b *testing.B) {
	s := newBenchServer(b)
	plain := mcp.Contract{Tool: "mem__echo", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}
	withRes := plain
	withRes.Resources = []policy.ResourceSpec{{Pointer: "/text", Kind: policy.KindPath}}
	bare, err := mcp.NewPipeline(s.m, []mcp.Contract{plain}, nopAudit{})
	if err != nil {
		b.Fatal(err)
	}
	ruled, err := mcp.NewPipeline(s.m, []mcp.Contract{withRes}, nopAudit{}, mcp.WithPolicy(benchRules()...))
	if err != nil {
		b.Fatal(err)
	}
	run := func(p *mcp.Pipeline) {
		r := p.Run(b.Context(), mcp.Proposal{TaskID: "t", Principal: "key:bob", Tenant: "acme", Tool: "mem__echo",
			SnapshotVersion: s.version, Arguments: map[string]any{"text": "./exports/../exports/a"}}, nil)
		if r.Outcome != mcp.OutcomeSuccess {
			b.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
	}
	allocs := testing.AllocsPerRun(200, func() { run(ruled) }) - testing.AllocsPerRun(200, func() { run(bare) })
	prop := mcp.Proposal{TaskID: "t", Principal: "key:bob", Tenant: "acme", Tool: "mem__echo", Arguments: map[string]any{"text": "./exports/../exports/a"}}
	explain := func(p *mcp.Pipeline) time.Duration {
		t0 := time.Now()
		if x, err := p.Explain(prop); err != nil || x.Verdict != policy.Allow {
			b.Fatalf("explain %+v, %v", x, err)
		}
		return time.Since(t0)
	}
	var bareTimes, ruledTimes, bareDecide, ruledDecide []time.Duration
	for b.Loop() {
		t0 := time.Now()
		run(bare)
		t1 := time.Now()
		run(ruled)
		bareTimes = append(bareTimes, t1.Sub(t0))
		ruledTimes = append(ruledTimes, time.Since(t1))
		bareDecide = append(bareDecide, explain(bare))
		ruledDecide = append(ruledDecide, explain(ruled))
	}
	bp, rp := median(bareTimes), median(ruledTimes)
	cost := median(ruledDecide) - median(bareDecide)
	b.ReportMetric(bp, "no-rules-p50-ns")
	b.ReportMetric(rp, "100-rules-p50-ns")
	b.ReportMetric(cost, "policy-ns")
	b.ReportMetric(cost/bp, "policy-share")
	b.ReportMetric(allocs, "policy-allocs")
}
