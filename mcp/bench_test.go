package mcp_test

import (
	"context"
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

// BenchmarkCallOverhead compares Manager.Call with a bare go-sdk CallTool on the same
// in-memory server, call by call, and reports the ratio of their medians (p50-ratio): what the
// pipeline (snapshot check, input and output validation, deadline, normalisation) costs.
func BenchmarkCallOverhead(b *testing.B) {
	ctx := b.Context()
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "echo"}, func(_ context.Context, _ *mcpsdk.CallToolRequest, in echoIn) (*mcpsdk.CallToolResult, echoOut, error) {
		return nil, echoOut{Text: in.Text, Len: len(in.Text)}, nil
	})
	connect := func() mcpsdk.Transport {
		st, ct := mcpsdk.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
		return ct
	}

	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bare", Version: "1"}, &mcpsdk.ClientOptions{Capabilities: &mcpsdk.ClientCapabilities{}})
	bare, err := client.Connect(ctx, connect(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = bare.Close() })

	m, err := mcp.NewManager([]mcp.ServerConfig{{Name: "mem", Transport: mcp.TransportStdio, Command: "in-memory"}},
		mcp.WithTransportForTest("mem", func() (mcpsdk.Transport, error) { return connect(), nil }))
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
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
	version := m.Snapshot().Version
	args := map[string]any{"text": "hello"}

	var bareTimes, pipeTimes []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := bare.CallTool(ctx, &mcpsdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r := m.Call(ctx, mcp.CallRequest{Tool: "mem__echo", SnapshotVersion: version, Arguments: args, ReadOnly: true})
		t2 := time.Now()
		if r.Outcome != mcp.OutcomeSuccess {
			b.Fatalf("outcome %s: %v", r.Outcome, r.Err)
		}
		bareTimes = append(bareTimes, t1.Sub(t0))
		pipeTimes = append(pipeTimes, t2.Sub(t1))
	}
	b.StopTimer()
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	bp, pp := p50(bareTimes), p50(pipeTimes)
	b.ReportMetric(bp, "bare-p50-ns")
	b.ReportMetric(pp, "pipeline-p50-ns")
	b.ReportMetric(pp/bp, "p50-ratio")
}
