package mcp_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/handoff-a2a/handoff/mcp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type progressIn struct {
	ID    string `json:"id"`
	Steps int    `json:"steps"`
}

// progressServer has a tool that sends steps progress notifications, each one only after the
// client has seen the one before (ack), so that the test need not sleep: every notification
// reaches the callback while the call is still running, and the result comes last.
func progressServer(ack func(id string) <-chan struct{}) *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "progress", Version: "1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "work"}, func(ctx context.Context, req *mcpsdk.CallToolRequest, in progressIn) (*mcpsdk.CallToolResult, any, error) {
		token := req.Params.GetProgressToken()
		if token == nil {
			return nil, map[string]any{"token": false}, nil
		}
		acks := ack(in.ID)
		for i := 1; i <= in.Steps; i++ {
			err := req.Session.NotifyProgress(ctx, &mcpsdk.ProgressNotificationParams{ProgressToken: token,
				Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("%s step %d", in.ID, i)})
			if err != nil {
				return nil, nil, err
			}
			select {
			case <-acks:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		return nil, map[string]any{"token": true}, nil
	})
	return srv
}

type step struct {
	progress, total float64
	message         string
}

// TestProgress: each call's progress notifications reach its own callback, in order, before
// its result, also when calls run at once on one session; a call without a callback carries
// no token.
func TestProgress(t *testing.T) {
	var mu sync.Mutex
	acks := map[string]chan struct{}{}
	ackFor := func(id string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if acks[id] == nil {
			acks[id] = make(chan struct{}, 1)
		}
		return acks[id]
	}
	srv := progressServer(func(id string) <-chan struct{} { return ackFor(id) })
	m := start(t, []mcp.ServerConfig{{Name: "mem", Transport: mcp.TransportStdio, Command: "in-memory"}},
		mcp.WithTransportForTest("mem", inMemory(srv)))
	waitReady(t, m, "mem")
	h := newHarness(t, m, []mcp.Contract{{Tool: "mem__*", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}})

	const steps = 4
	ids := []string{"a", "b", "c"}
	got := make([][]step, len(ids))
	results := make([]mcp.PipelineResult, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		h.runs++
		wg.Go(func() {
			results[i] = h.p.Run(t.Context(), mcp.Proposal{TaskID: "t", Tool: "mem__work", SnapshotVersion: m.Snapshot().Version,
				Arguments: map[string]any{"id": id, "steps": steps},
				Progress: func(progress, total float64, message string) {
					got[i] = append(got[i], step{progress, total, message})
					ackFor(id) <- struct{}{}
				}}, nil)
		})
	}
	wg.Wait()
	for i, id := range ids {
		wantOutcome(t, results[i], mcp.OutcomeSuccess)
		var want []step
		for n := 1; n <= steps; n++ {
			want = append(want, step{float64(n), steps, fmt.Sprintf("%s step %d", id, n)})
		}
		if !slices.Equal(got[i], want) {
			t.Errorf("call %s: progress %v, want %v", id, got[i], want)
		}
		if sc := string(mustJSON(t, results[i].StructuredContent)); sc != `{"token":true}` {
			t.Errorf("call %s: result %s", id, sc)
		}
	}

	r := call(t, m, mcp.CallRequest{Tool: "mem__work", Arguments: map[string]any{"id": "none", "steps": 1}, ReadOnly: true})
	want(t, r, mcp.OutcomeSuccess)
	if sc := string(mustJSON(t, r.StructuredContent)); sc != `{"token":false}` {
		t.Errorf("a call without a callback carried a progress token: %s", sc)
	}
	h.records(t)
}

// TestProgressEverything: the reference TypeScript server's long-running operation reports
// its steps to the callback, in order, and nothing reaches the callback after Call returns.
func TestProgressEverything(t *testing.T) {
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	env := map[string]string{"PATH": os.Getenv("PATH")}
	m := start(t, []mcp.ServerConfig{{Name: "every", Transport: mcp.TransportStdio, Command: "node", Args: []string{everything, "stdio"}}},
		mcp.WithLookupEnv(func(name string) (string, bool) { v, ok := env[name]; return v, ok }))
	waitReady(t, m, "every")
	waitFor(t, m, "the long-running tool", func() bool {
		_, ok := m.Snapshot().Tool("every__trigger-long-running-operation")
		return ok
	})

	const steps = 4
	var (
		mu       sync.Mutex
		got      []float64
		returned bool
		late     bool
	)
	r := call(t, m, mcp.CallRequest{Tool: "every__trigger-long-running-operation", ReadOnly: true,
		Arguments: map[string]any{"duration": 0.4, "steps": steps},
		Progress: func(progress, total float64, _ string) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				late = true
			}
			if total != steps {
				t.Errorf("total %v, want %d", total, steps)
			}
			got = append(got, progress)
		}})
	mu.Lock()
	returned = true
	mu.Unlock()
	want(t, r, mcp.OutcomeSuccess)

	mu.Lock()
	defer mu.Unlock()
	if late {
		t.Error("progress reached the callback after Call returned")
	}
	// The steps are 100ms apart, so all but the last surely arrive before the result; the
	// last one travels right in front of the result and may be dropped (see CallRequest.Progress).
	if len(got) < steps-1 {
		t.Fatalf("progress %v, want 1…%d in order", got, steps)
	}
	for i, p := range got {
		if p != float64(i+1) {
			t.Fatalf("progress %v, want 1…%d in order", got, steps)
		}
	}
}

// TestProgressScrubsRedacted: progress messages that echo a redacted argument reach the
// proposal's callback with the value masked.
func TestProgressScrubsRedacted(t *testing.T) {
	ack := make(chan struct{}, 1)
	srv := progressServer(func(string) <-chan struct{} { return ack })
	m := start(t, []mcp.ServerConfig{{Name: "mem", Transport: mcp.TransportStdio, Command: "in-memory"}},
		mcp.WithTransportForTest("mem", inMemory(srv)))
	waitReady(t, m, "mem")
	h := newHarness(t, m, []mcp.Contract{{Tool: "mem__*", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone,
		Redact: []string{"id"}}})
	var got []string
	h.runs++
	r := h.p.Run(t.Context(), mcp.Proposal{TaskID: "t", Tool: "mem__work", SnapshotVersion: m.Snapshot().Version,
		Arguments: map[string]any{"id": "SECRET-ID-9", "steps": 2},
		Progress: func(_, _ float64, message string) {
			got = append(got, message)
			ack <- struct{}{}
		}}, nil)
	wantOutcome(t, r, mcp.OutcomeSuccess)
	if want := []string{mcp.Redacted + " step 1", mcp.Redacted + " step 2"}; !slices.Equal(got, want) {
		t.Fatalf("progress messages %q, want %q", got, want)
	}
}
