package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
	"github.com/handoff-a2a/handoff/tasks"
)

// TestPushRetryCommand: alice's webhook refuses, and at max_attempts 1 her
// task's event is a dead letter; once the webhook accepts, "handoff push
// retry" as alice sends it, and the webhook gets it once. Bob, another
// caller, cannot retry alice's config, and a missing --config is a usage
// error.
func TestPushRetryCommand(t *testing.T) {
	var accept atomic.Bool
	var mu sync.Mutex
	got := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !accept.Load() {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got[r.Header.Get(webhook.HeaderDeliveryID)]++
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	url, _ := serveHandoff(t, t.TempDir(), fmt.Sprintf("name: A\ndescription: B\nlog: {level: error}\n"+
		"limits: {shutdown_grace: 1s}\nauth: {api_keys: [{name: alice, sha256: %s}, {name: bob, sha256: %s}]}\ncapabilities: {push_notifications: true}\n"+
		"push: {allow_hosts: [127.0.0.1], max_attempts: 1, timeout: 1s}\nskills: [{id: s, name: S, executor: tck}]\n",
		auth.HashAPIKey("alice-key"), auth.HashAPIKey("bob-key")))
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"hi"}]},` +
		`"configuration":{"taskPushNotificationConfig":{"url":"` + hook.URL + `/hook"}}}}`
	req, _ := http.NewRequest("POST", url+"/a2a/jsonrpc", strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("X-API-Key", "alice-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var out bytes.Buffer
	var st []push.Status
	for range 500 {
		out.Reset()
		if err := run(t.Context(), []string{"push", "status", url, "--api-key", "alice-key", "--json"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		st = decodeLines[push.Status](t, out.String())
		if len(st) == 1 && len(st[0].Dead) > 0 && st[0].Pending == 0 {
			break
		}
		<-waitABit()
	}
	if len(st) != 1 || len(st[0].Dead) == 0 {
		t.Fatalf("statuses %+v, want a dead letter", st)
	}
	task, config, seq := string(st[0].TaskID), st[0].ConfigID, st[0].Dead[0].Seq

	if err := run(t.Context(), []string{"push", "retry", url, task}, &out, &out); err == nil || !strings.Contains(err.Error(), "--config ID is required") {
		t.Fatalf("push retry without --config: %v", err)
	}
	err = run(t.Context(), []string{"push", "retry", url, task, "--config", config, "--seq", fmt.Sprint(seq), "--api-key", "bob-key"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("bob retries alice's config: %v, want 404", err)
	}
	accept.Store(true)
	out.Reset()
	if err := run(t.Context(), []string{"push", "retry", url, task, "--config", config, "--seq", fmt.Sprint(seq), "--api-key", "alice-key"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.Contains(text, fmt.Sprintf("retry of event %d of task %s", seq, task)) || !strings.Contains(text, "requested as key:alice") {
		t.Fatalf("push retry printed:\n%s", text)
	}
	id := fmt.Sprintf("%s/%s/%d", task, config, seq)
	for range 500 {
		mu.Lock()
		n := got[id]
		mu.Unlock()
		if n > 0 {
			break
		}
		<-waitABit()
	}
	for range 500 { // the dead letter leaves once the worker stored the delivery
		out.Reset()
		if err := run(t.Context(), []string{"push", "status", url, "--api-key", "alice-key", "--json"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		if st = decodeLines[push.Status](t, out.String()); len(st) == 1 && !slices.ContainsFunc(st[0].Dead, func(d tasks.DeadDelivery) bool { return d.Seq == seq }) {
			break
		}
		<-waitABit()
	}
	if slices.ContainsFunc(st[0].Dead, func(d tasks.DeadDelivery) bool { return d.Seq == seq }) {
		t.Fatalf("event %d is still a dead letter: %+v", seq, st)
	}
	mu.Lock()
	defer mu.Unlock()
	if got[id] != 1 {
		t.Fatalf("webhook got %s %d times, want once (all: %v)", id, got[id], got)
	}
}
