package mcp_test

import (
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
)

// waitUntil polls ok for up to 10s, then fails t with what.
func waitUntil(t *testing.T, ok func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestObserversRunInOrder: the queued events run one after another in the order they came,
// each through its point's hooks in their configured order, as commands (JSON on stdin,
// named) and as http POSTs. Hooks that fail (exit 1, time out, cannot start) are logged by
// name and do not stop the hooks after them; Notify never waits for a hook.
func TestObserversRunInOrder(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	record := script(t, dir, "record", `read -r line; printf '%s\n' "$line" >> "`+seen+`"`)
	var posted struct {
		sync.Mutex
		bodies []map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev map[string]any
		_ = json.Unmarshal(body, &ev)
		posted.Lock()
		posted.bodies = append(posted.bodies, ev)
		posted.Unlock()
	}))
	t.Cleanup(srv.Close)
	logs := &syncBuffer{}
	obs, err := mcp.NewObservers([]mcp.Hook{
		{Name: "first", Point: mcp.HookTaskCreated, Command: record},
		{Name: "broken", Point: mcp.HookTaskCreated, Command: script(t, dir, "broken", "exit 1")},
		{Name: "slow", Point: mcp.HookTaskCreated, Command: script(t, dir, "slow", "sleep 10"), Timeout: 300 * time.Millisecond},
		{Name: "missing", Point: mcp.HookTaskCreated, Command: filepath.Join(dir, "no-such-hook")},
		{Name: "second", Point: mcp.HookTaskCreated, Command: record},
		{Name: "finished", Point: mcp.HookTaskFinished, Command: record},
		{Name: "gate", Point: mcp.HookGateDecided, Command: record},
		{Name: "web", Point: mcp.HookGateDecided, URL: srv.URL + "/gate"},
	}, mcp.ObserversConfig{Client: srv.Client(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	start := time.Now()
	obs.Notify(mcp.TaskHookEvent{Point: mcp.HookTaskCreated, TaskID: "t1", ContextID: "c1", Principal: "key:bob", Tenant: "acme",
		Skill: "notes", State: "TASK_STATE_SUBMITTED", Time: at})
	obs.Notify(mcp.GateHookEvent{DelegationID: "t1", TaskID: "t1", Skill: "pay", Peer: "payments", Outcome: "rejected",
		Reason: "artifact receipt: missing", Checks: []mcp.HookCheck{{Name: "artifact receipt", Reason: "missing"}}, Time: at})
	obs.Notify(mcp.TaskHookEvent{Point: mcp.HookTaskFinished, TaskID: "t1", ContextID: "c1", Principal: "key:bob",
		State: "TASK_STATE_FAILED", Status: "Not committed", Time: at})
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Notify took %s: it waited for the hooks", d)
	}
	var lines []map[string]any
	waitUntil(t, func() bool {
		b, _ := os.ReadFile(seen)
		lines = nil
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				lines = append(lines, m)
			}
		}
		return len(lines) == 4
	}, func() string { return "the command hooks did not all run" })
	var order []string
	for _, l := range lines {
		order = append(order, l["point"].(string)+"/"+l["hook"].(string))
	}
	if got := strings.Join(order, " "); got != "task_created/first task_created/second gate_decided/gate task_finished/finished" {
		t.Errorf("order %s", got)
	}
	created := lines[0]
	for k, want := range map[string]any{"task_id": "t1", "context_id": "c1", "principal": "key:bob", "tenant": "acme", "skill": "notes",
		"state": "TASK_STATE_SUBMITTED", "time": "2026-12-01T10:00:00Z"} {
		if created[k] != want {
			t.Errorf("task_created %s = %v, want %v", k, created[k], want)
		}
	}
	if lines[3]["status"] != "Not committed" || lines[3]["state"] != "TASK_STATE_FAILED" {
		t.Errorf("task_finished %v", lines[3])
	}
	gate := lines[2]
	checks, _ := gate["checks"].([]any)
	if gate["delegation_id"] != "t1" || gate["peer"] != "payments" || gate["outcome"] != "rejected" || len(checks) != 1 ||
		checks[0].(map[string]any)["name"] != "artifact receipt" || checks[0].(map[string]any)["passed"] != false {
		t.Errorf("gate_decided %v", gate)
	}
	waitUntil(t, func() bool { posted.Lock(); defer posted.Unlock(); return len(posted.bodies) == 1 },
		func() string { return "the http hook was not posted" })
	posted.Lock()
	if posted.bodies[0]["hook"] != "web" || posted.bodies[0]["point"] != "gate_decided" {
		t.Errorf("posted %v", posted.bodies[0])
	}
	posted.Unlock()
	log := logs.String()
	for _, want := range []string{"hook=broken", "exited with status 1", "hook=slow", "timed out after 300ms", "hook=missing"} {
		if !strings.Contains(log, want) {
			t.Errorf("log does not say %q:\n%s", want, log)
		}
	}
}

// TestObserversDropWhenFull: with the queue full, an event is dropped with a log line
// rather than waited for.
func TestObserversDropWhenFull(t *testing.T) {
	dir := t.TempDir()
	logs := &syncBuffer{}
	obs, err := mcp.NewObservers([]mcp.Hook{{Name: "slow", Point: mcp.HookTaskFinished, Command: script(t, dir, "slow", "sleep 1")}},
		mcp.ObserversConfig{Queue: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(obs.Close)
	start := time.Now()
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		obs.Notify(mcp.TaskHookEvent{Point: mcp.HookTaskFinished, TaskID: id})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Notify took %s with the queue full", d)
	}
	if !strings.Contains(logs.String(), "event dropped") || !strings.Contains(logs.String(), "id=t4") {
		t.Errorf("log:\n%s", logs.String())
	}
	// A point with no hooks queues nothing.
	obs.Notify(mcp.TaskHookEvent{Point: mcp.HookTaskCreated, TaskID: "t5"})
	if strings.Contains(logs.String(), "id=t5") {
		t.Errorf("an event without hooks was queued:\n%s", logs.String())
	}
}

// TestObserversConfigErrors: NewObservers takes only the observer points and reports every
// problem at once; the pipeline takes none of them.
func TestObserversConfigErrors(t *testing.T) {
	_, err := mcp.NewObservers([]mcp.Hook{
		{Name: "a", Point: mcp.HookPreToolCall, Command: "x"},
		{Name: "b", Point: mcp.HookTaskCreated, URL: "https://hooks.example/b"},
		{Name: "c", Point: mcp.HookGateDecided},
	}, mcp.ObserversConfig{})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"pre_tool_call" is not one of task_created, task_finished, gate_decided`, "WithHookClient", "a command or a url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	m, err := mcp.NewManager(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcp.NewPipeline(m, nil, nopAudit{}, mcp.WithHooks(mcp.Hook{Name: "a", Point: mcp.HookTaskCreated, Command: "x"}))
	if err == nil || !strings.Contains(err.Error(), `"task_created" is not one of pre_tool_call, post_tool_call`) {
		t.Fatalf("pipeline with a task_created hook: %v", err)
	}
}
