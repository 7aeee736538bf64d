package mcp_test

import (
	"context"
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
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	bp, gp := p50(bareTimes), p50(govTimes)
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

// BenchmarkPipelineOverhead compares Pipeline.Run with a bare go-sdk CallTool on the same
// in-memory server and reports the ratio of their medians: the whole governed path
// (canonical digest, validation, policy, call, normalisation, audit record). With nop the
// audit log stores nothing; with bolt it is a BoltAudit, whose fsync per call is the price of
// a durable record and depends on the disk, not on the pipeline.
func BenchmarkPipelineOverhead(b *testing.B) {
	for _, tc := range []struct {
		name  string
		audit func(b *testing.B) mcp.AuditLog
	}{
		{"nop", func(*testing.B) mcp.AuditLog { return nopAudit{} }},
		{"bolt", func(b *testing.B) mcp.AuditLog {
			a, err := mcp.OpenBoltAudit(filepath.Join(b.TempDir(), "audit.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = a.Close() })
			return a
		}},
	} {
		b.Run("audit="+tc.name, func(b *testing.B) {
			s := newBenchServer(b)
			p, err := mcp.NewPipeline(s.m, []mcp.Contract{{Tool: "mem__echo", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}}, tc.audit(b))
			if err != nil {
				b.Fatal(err)
			}
			s.overhead(b, func() (mcp.Outcome, error) {
				r := p.Run(b.Context(), mcp.Proposal{TaskID: "t", Principal: "bob", Tool: "mem__echo",
					SnapshotVersion: s.version, Arguments: map[string]any{"text": "hello"}}, nil)
				if r.AuditErr != nil {
					return mcp.OutcomeProtocolError, r.AuditErr
				}
				return r.Outcome, r.Err
			})
		})
	}
}
