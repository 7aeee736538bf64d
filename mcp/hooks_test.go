package mcp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// syncBuffer is a log destination safe for the pipeline's goroutines and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestPipelineGuardHooks: a pre_tool_call hook may deny or ask, never allow past a deny; one
// that times out, exits non-zero, cannot start or answers nonsense refuses the call with its
// name in the reason. It sees the canonical arguments with redacted values masked, in an
// environment restricted as a stdio server's.
func TestPipelineGuardHooks(t *testing.T) {
	m := exampleManager(t)
	dir := t.TempDir()
	t.Setenv("HOOKTEST_SECRET", "s3cret")
	t.Setenv("HOOKTEST_SHARED", "shared")
	seen := filepath.Join(dir, "seen.json")
	envOut := filepath.Join(dir, "env.txt")
	hooks := map[string]string{
		"deny":    script(t, dir, "deny", `cat > /dev/null; echo '{"decision":"deny","reason":"not on fridays"}'`),
		"ask":     script(t, dir, "ask", `cat > /dev/null; echo '{"decision":"ask","reason":"looks odd"}'`),
		"allow":   script(t, dir, "allow", `cat > "`+seen+`"; env > "`+envOut+`"; echo '{"decision":"allow"}'`),
		"slow":    script(t, dir, "slow", `sleep 10`),
		"exit":    script(t, dir, "exit", `cat > /dev/null; exit 3`),
		"garbage": script(t, dir, "garbage", `cat > /dev/null; echo 'not json'`),
		"missing": filepath.Join(dir, "no-such-hook"),
	}
	contracts := []mcp.Contract{
		{Tool: "ex__write_note", Effect: mcp.EffectWrite, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone, Redact: []string{"text"},
			Resources: []policy.ResourceSpec{{Pointer: "/name", Kind: policy.KindPath}}},
	}
	write := mcp.Proposal{TaskID: "t1", Principal: "bob", Tool: "ex__write_note", Arguments: map[string]any{"name": "a/../hooked", "text": "private words"}}
	for _, tc := range []struct {
		hook    string
		outcome mcp.Outcome
		reason  string
	}{
		{"allow", mcp.OutcomeSuccess, ""},
		{"deny", mcp.OutcomePermissionDenied, "hook deny denied the call: not on fridays"},
		{"ask", mcp.OutcomeApprovalRequired, "hook ask asks for an approval: looks odd"},
		{"slow", mcp.OutcomePermissionDenied, "hook slow failed: timed out after 300ms"},
		{"exit", mcp.OutcomePermissionDenied, "hook exit failed: exited with status 3"},
		{"garbage", mcp.OutcomePermissionDenied, "hook garbage failed: its answer is not a JSON object"},
		{"missing", mcp.OutcomePermissionDenied, "hook missing failed:"},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			h := newHarness(t, m, contracts, mcp.WithHooks(mcp.Hook{Name: tc.hook, Point: mcp.HookPreToolCall, Command: hooks[tc.hook],
				InheritEnv: []string{"HOOKTEST_SHARED"}, Env: map[string]string{"HOOK_ROLE": "guard"}, Timeout: 300 * time.Millisecond}))
			start := time.Now()
			r := h.run(t, write, nil)
			wantOutcome(t, r, tc.outcome)
			if time.Since(start) > 5*time.Second {
				t.Fatalf("the hook held the call %s", time.Since(start))
			}
			rec := h.record(t, r)
			if tc.reason != "" {
				if !strings.Contains(rec.Reason, tc.reason) || rec.Hook != tc.hook {
					t.Fatalf("record reason %q hook %q, want %q", rec.Reason, rec.Hook, tc.reason)
				}
			}
			if strings.Contains(rec.Reason, "private words") {
				t.Fatal("a redacted value reached the audit")
			}
		})
	}

	var ev mcp.HookEvent
	raw, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Point != mcp.HookPreToolCall || ev.Hook != "allow" || ev.Tool != "ex__write_note" || ev.Principal != "bob" ||
		ev.Arguments["text"] != mcp.Redacted || len(ev.Resources) != 1 || ev.Resources[0].Value != "hooked" || ev.Decision.Verdict != policy.Allow {
		t.Fatalf("the hook saw %s", raw)
	}
	env, _ := os.ReadFile(envOut)
	if !strings.Contains(string(env), "HOOKTEST_SHARED=shared") || !strings.Contains(string(env), "HOOK_ROLE=guard") || strings.Contains(string(env), "s3cret") {
		t.Fatalf("hook environment:\n%s", env)
	}

	// A policy deny is final: the guard is not even asked.
	ran := filepath.Join(dir, "ran")
	h := newHarness(t, m, contracts, mcp.WithDeny("ex__write_*"), mcp.WithHooks(mcp.Hook{Name: "allow-all", Point: mcp.HookPreToolCall,
		Command: script(t, dir, "allow-all", `touch "`+ran+`"; echo '{"decision":"allow"}'`)}))
	wantOutcome(t, h.run(t, write, nil), mcp.OutcomePermissionDenied)
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a guard ran on a denied call")
	}
}

// TestPipelineObserverHooks: a post_tool_call hook sees the outcome; one that fails leaves
// the call as it was and logs a line naming it. An http hook is POSTed the event.
func TestPipelineObserverHooks(t *testing.T) {
	m := exampleManager(t)
	dir := t.TempDir()
	var posted struct {
		sync.Mutex
		events []mcp.HookEvent
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev mcp.HookEvent
		_ = json.Unmarshal(body, &ev)
		posted.Lock()
		posted.events = append(posted.events, ev)
		posted.Unlock()
		if ev.Point == mcp.HookPreToolCall {
			_, _ = w.Write([]byte(`{"decision":"allow"}`))
		}
	}))
	t.Cleanup(srv.Close)
	logs := &syncBuffer{}
	contracts := []mcp.Contract{{Tool: "ex__read_note", Effect: mcp.EffectRead, Risk: mcp.RiskLow, Approval: mcp.ApprovalNone}}
	h := newHarness(t, m, contracts, mcp.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), mcp.WithHookClient(srv.Client()),
		mcp.WithHooks(
			mcp.Hook{Name: "web-guard", Point: mcp.HookPreToolCall, URL: srv.URL + "/pre"},
			mcp.Hook{Name: "broken-observer", Point: mcp.HookPostToolCall, Command: script(t, dir, "broken", "exit 1")},
			mcp.Hook{Name: "web-observer", Point: mcp.HookPostToolCall, URL: srv.URL + "/post"},
		))
	r := h.run(t, mcp.Proposal{TaskID: "t1", Tool: "ex__read_note", Arguments: map[string]any{"name": "welcome"}}, nil)
	wantOutcome(t, r, mcp.OutcomeSuccess)
	if !strings.Contains(logs.String(), "observing hook failed") || !strings.Contains(logs.String(), "hook=broken-observer") {
		t.Fatalf("log:\n%s", logs.String())
	}
	posted.Lock()
	defer posted.Unlock()
	if len(posted.events) != 2 || posted.events[0].Point != mcp.HookPreToolCall || posted.events[1].Point != mcp.HookPostToolCall ||
		posted.events[1].Outcome != mcp.OutcomeSuccess || posted.events[1].Hook != "web-observer" {
		t.Fatalf("posted %+v", posted.events)
	}
}

// TestHookConfigErrors: every problem with the hooks is reported by NewPipeline at once.
func TestHookConfigErrors(t *testing.T) {
	m, err := mcp.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcp.NewPipeline(m, nil, nopAudit{}, mcp.WithHooks(
		mcp.Hook{Point: mcp.HookPreToolCall, Command: "x"},
		mcp.Hook{Name: "a", Point: "task_started", Command: "x"},
		mcp.Hook{Name: "b", Point: mcp.HookPreToolCall},
		mcp.Hook{Name: "c", Point: mcp.HookPreToolCall, URL: "https://hooks.example/c"},
		mcp.Hook{Name: "c", Point: mcp.HookPostToolCall, Command: "x", Timeout: -1},
	))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"no name", `"task_started"`, "a command or a url", "WithHookClient", "name used twice", "negative timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}
