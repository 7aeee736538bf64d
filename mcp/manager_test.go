package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
)

var exampleTools = []string{"ex__fail", "ex__list_notes", "ex__read_note", "ex__slow", "ex__stats", "ex__toggle_tool", "ex__write_note"}

func toolNames(s *mcp.Snapshot) []string {
	var names []string
	for _, t := range s.Tools {
		names = append(names, t.Name)
	}
	return names
}

func call(t *testing.T, m *mcp.Manager, req mcp.CallRequest) mcp.Result {
	t.Helper()
	if req.SnapshotVersion == "" {
		req.SnapshotVersion = m.Snapshot().Version
	}
	return m.Call(t.Context(), req)
}

func want(t *testing.T, r mcp.Result, o mcp.Outcome) {
	t.Helper()
	if r.Outcome != o {
		t.Fatalf("%s: outcome %s (err %v), want %s", r.Tool, r.Outcome, r.Err, o)
	}
}

// TestExampleServer runs the pipeline against the example server over both transports.
func TestExampleServer(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			cfg := mcp.ServerConfig{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer, Args: []string{"--page-size", "2"}}
			if transport == "http" {
				cfg = mcp.ServerConfig{Name: "ex", Transport: mcp.TransportHTTP, URL: httpExample(t, "--page-size", "2")}
			}
			m := start(t, []mcp.ServerConfig{cfg})
			waitReady(t, m, "ex")

			t.Run("list with pagination", func(t *testing.T) {
				// 7 tools, 2 a page: the catalog is complete only if every page was read.
				if got := strings.Join(toolNames(m.Snapshot()), " "); got != strings.Join(exampleTools, " ") {
					t.Fatalf("catalog %s, want %s", got, exampleTools)
				}
			})
			t.Run("call", func(t *testing.T) {
				r := call(t, m, mcp.CallRequest{Tool: "ex__read_note", Arguments: map[string]any{"name": "welcome"}, ReadOnly: true})
				want(t, r, mcp.OutcomeSuccess)
				if len(r.Content) != 1 || !strings.Contains(string(mustJSON(t, r.Content[0])), "Hello") {
					t.Fatalf("content %s", mustJSON(t, r.Content))
				}
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__list_notes"}), mcp.OutcomeSuccess) // nil arguments go as {}
			})
			t.Run("arguments validated", func(t *testing.T) {
				r := call(t, m, mcp.CallRequest{Tool: "ex__read_note", Arguments: map[string]any{"name": 5}})
				want(t, r, mcp.OutcomeValidationFailed)
				if r.Attempts != 0 {
					t.Fatalf("invalid arguments reached the server (%d attempts)", r.Attempts)
				}
			})
			t.Run("structured output validated", func(t *testing.T) {
				r := call(t, m, mcp.CallRequest{Tool: "ex__stats", ReadOnly: true})
				want(t, r, mcp.OutcomeSuccess)
				if got := string(mustJSON(t, r.StructuredContent)); !strings.Contains(got, `"notes":`) {
					t.Fatalf("structured content %s", got)
				}
			})
			t.Run("broken output", func(t *testing.T) {
				r := call(t, m, mcp.CallRequest{Tool: "ex__stats", Arguments: map[string]any{"break": true}})
				want(t, r, mcp.OutcomeValidationFailed)
				if r.StructuredContent != nil {
					t.Fatalf("broken output passed on: %v", r.StructuredContent)
				}
			})
			t.Run("override output schema", func(t *testing.T) {
				r := call(t, m, mcp.CallRequest{Tool: "ex__stats", OutputSchema: json.RawMessage(`{"type":"object","required":["owner"]}`)})
				want(t, r, mcp.OutcomeValidationFailed)
			})
			t.Run("isError is a tool error", func(t *testing.T) {
				r := call(t, m, mcp.CallRequest{Tool: "ex__fail"})
				want(t, r, mcp.OutcomeToolError)
				if !strings.Contains(r.Err.Error(), "failed, as asked") {
					t.Fatalf("err %v", r.Err)
				}
			})
			t.Run("timeout", func(t *testing.T) {
				args := map[string]any{"ms": 60_000}
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__slow", Arguments: args, Timeout: 100 * time.Millisecond, ReadOnly: true}), mcp.OutcomeTimeout)
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__slow", Arguments: args, Timeout: 100 * time.Millisecond}), mcp.OutcomeUnknownOutcome)
			})
			t.Run("cancelled", func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				r := m.Call(ctx, mcp.CallRequest{Tool: "ex__slow", SnapshotVersion: m.Snapshot().Version, Arguments: map[string]any{"ms": 60_000}})
				want(t, r, mcp.OutcomeCancelled)
			})
			t.Run("list_changed and stale calls", func(t *testing.T) {
				before := m.Snapshot()
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__toggle_tool"}), mcp.OutcomeSuccess)
				waitFor(t, m, "extra tool", func() bool { _, ok := m.Snapshot().Tool("ex__extra"); return ok })
				with := m.Snapshot()
				if with.Version == before.Version {
					t.Fatal("list_changed kept the snapshot version")
				}
				// Planned against the old snapshot: the new tool is not what was planned.
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__extra", SnapshotVersion: before.Version}), mcp.OutcomeUnavailableTool)
				// An unchanged tool still runs for a call planned against the old snapshot.
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__list_notes", SnapshotVersion: before.Version}), mcp.OutcomeSuccess)
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__extra", SnapshotVersion: with.Version}), mcp.OutcomeSuccess)

				want(t, call(t, m, mcp.CallRequest{Tool: "ex__toggle_tool"}), mcp.OutcomeSuccess)
				waitFor(t, m, "extra tool gone", func() bool { _, ok := m.Snapshot().Tool("ex__extra"); return !ok })
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__extra", SnapshotVersion: with.Version}), mcp.OutcomeUnavailableTool)
				want(t, call(t, m, mcp.CallRequest{Tool: "ex__read_note", SnapshotVersion: "no-such-version", Arguments: map[string]any{"name": "welcome"}}), mcp.OutcomeUnavailableTool)
				if m.Snapshot().Version != before.Version {
					t.Fatal("the same tools again should hash to the same version")
				}
			})
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKillMidCall kills the stdio server with SIGKILL while calls are in flight.
func TestKillMidCall(t *testing.T) {
	dir := t.TempDir()
	events, pidFile := filepath.Join(dir, "events"), filepath.Join(dir, "pid")
	m := start(t, []mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer,
		Args: []string{"--events", events, "--pid-file", pidFile}}})
	waitReady(t, m, "ex")

	starts := func() int {
		b, _ := os.ReadFile(events)
		return strings.Count(string(b), "start slow")
	}
	kill := func(after int) {
		poll(t, "slow call in flight", func() bool { return starts() >= after })
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	result := func(req mcp.CallRequest) <-chan mcp.Result {
		out := make(chan mcp.Result, 1)
		req.SnapshotVersion = m.Snapshot().Version
		go func() { out <- m.Call(context.Background(), req) }()
		return out
	}

	t.Run("write ends unknown_outcome", func(t *testing.T) {
		res := result(mcp.CallRequest{Tool: "ex__slow", Arguments: map[string]any{"ms": 60_000}, Timeout: 30 * time.Second})
		kill(1)
		r := <-res
		want(t, r, mcp.OutcomeUnknownOutcome)
		if r.Attempts != 1 {
			t.Fatalf("a write was sent %d times", r.Attempts)
		}
	})
	t.Run("reconnects", func(t *testing.T) {
		waitFor(t, m, "reconnect", func() bool { s := status(m, "ex"); return s.State == mcp.StateReady && s.Connects >= 2 })
		want(t, call(t, m, mcp.CallRequest{Tool: "ex__list_notes", ReadOnly: true}), mcp.OutcomeSuccess)
	})
	t.Run("read is retried once", func(t *testing.T) {
		release := filepath.Join(dir, "release")
		res := result(mcp.CallRequest{Tool: "ex__slow", ReadOnly: true, Timeout: 30 * time.Second,
			Arguments: map[string]any{"ms": 60_000, "until_file": release}, IdempotencyKey: "retry-key"})
		kill(2)
		// The retry runs on the restarted server; let it finish.
		for starts() < 3 { // the retry has reached the restarted server
			select {
			case r := <-res:
				t.Fatalf("ended before its retry ran: %s (%v), %d attempts", r.Outcome, r.Err, r.Attempts)
			case <-time.After(5 * time.Millisecond):
			}
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := <-res
		want(t, r, mcp.OutcomeSuccess)
		if r.Attempts != 2 {
			t.Fatalf("attempts %d, want 2", r.Attempts)
		}
		if b, _ := os.ReadFile(events); strings.Count(string(b), "start slow") != 3 || strings.Count(string(b), "key=retry-key") != 2 {
			t.Fatalf("the first try and the retry should both carry the key:\n%s", b)
		}
	})
	t.Run("later calls succeed", func(t *testing.T) {
		want(t, call(t, m, mcp.CallRequest{Tool: "ex__read_note", Arguments: map[string]any{"name": "welcome"}, ReadOnly: true}), mcp.OutcomeSuccess)
	})
}

// TestHTTPSessionLost: a restarted HTTP server has forgotten the session; the supervisor
// reconnects and a read call is retried on the new session.
func TestHTTPSessionLost(t *testing.T) {
	url, cmd := runHTTPExample(t, "127.0.0.1:0")
	m := start(t, []mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportHTTP, URL: url}})
	waitReady(t, m, "ex")
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	runHTTPExample(t, addr) // same address, new process: the old session id is unknown there
	r := call(t, m, mcp.CallRequest{Tool: "ex__read_note", Arguments: map[string]any{"name": "welcome"}, ReadOnly: true})
	want(t, r, mcp.OutcomeSuccess)
	waitFor(t, m, "reconnect", func() bool { return status(m, "ex").Connects >= 2 })
}

// TestServerNeverStarts: a server that cannot start is marked unavailable; the other serves.
func TestServerNeverStarts(t *testing.T) {
	m := start(t, []mcp.ServerConfig{
		{Name: "broken", Transport: mcp.TransportStdio, Command: filepath.Join(t.TempDir(), "no-such-server")},
		{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer},
	}, mcp.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	waitReady(t, m, "ex")
	waitFor(t, m, "broken unavailable", func() bool { return status(m, "broken").State == mcp.StateUnavailable })
	if s := status(m, "broken"); s.Err == nil {
		t.Fatal("unavailable server without an error")
	}
	want(t, call(t, m, mcp.CallRequest{Tool: "ex__list_notes"}), mcp.OutcomeSuccess)
	want(t, call(t, m, mcp.CallRequest{Tool: "broken__anything"}), mcp.OutcomeUnavailableTool)
}

// TestFilters: allow and deny globs decide what is discoverable and callable.
func TestFilters(t *testing.T) {
	m := start(t, []mcp.ServerConfig{{Name: "ex", Transport: mcp.TransportStdio, Command: exampleServer,
		Allow: []string{"*_note", "stats"}, Deny: []string{"write_*"}}})
	waitReady(t, m, "ex")
	if got := strings.Join(toolNames(m.Snapshot()), " "); got != "ex__read_note ex__stats" {
		t.Fatalf("catalog %s", got)
	}
	want(t, call(t, m, mcp.CallRequest{Tool: "ex__write_note", Arguments: map[string]any{"name": "a", "text": "b"}}), mcp.OutcomeUnavailableTool)
}
