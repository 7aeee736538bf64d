package mcp_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
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
