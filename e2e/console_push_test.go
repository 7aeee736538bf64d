package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/push/webhook"
)

// TestConsolePushRetry: alice's webhook refuses, and at max_attempts 1
// each event of her task is a dead letter, listed on her console's push
// page; once the webhook accepts, her "Retry now" button on the first one
// has it delivered, exactly once, and its row leaves the page. Bob cannot
// retry alice's config, and a retry without the CSRF token is refused.
func TestConsolePushRetry(t *testing.T) {
	if _, err := exec.LookPath(chromiumPath); err != nil {
		t.Fatalf("%s is missing (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	shots := os.Getenv("HANDOFF_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	var accept atomic.Bool
	var mu sync.Mutex
	got := map[string]int{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !accept.Load() {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got[r.Header.Get(webhook.HeaderDeliveryID)]++
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	ag := launchAgent(t, "console-push", freeAddr(t), fmt.Sprintf(`name: Pusher
description: Pushes to webhooks
log: {level: info}
limits: {shutdown_grace: 2s}
auth:
  api_keys: [{name: alice, sha256: %s}, {name: bob, sha256: %s}]
capabilities: {push_notifications: true}
push: {allow_hosts: [127.0.0.1], max_attempts: 1, timeout: 1s}
skills: [{id: s, name: S, executor: tck}]
`, auth.HashAPIKey("alice-key"), auth.HashAPIKey("bob-key")))
	ag.waitReady()

	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"tck-complete-task-1","role":"ROLE_USER","parts":[{"text":"hi"}]},` +
		`"configuration":{"taskPushNotificationConfig":{"url":"` + hook.URL + `/hook"}}}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, ag.base+"/a2a/jsonrpc", strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "alice-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	newUser := func(name string) *browserUser {
		ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		if err := chromedp.Do(ctx); err != nil {
			t.Fatalf("open a browser context for %s: %v", name, err)
		}
		return &browserUser{t: t, name: name, ctx: ctx, shot: shots}
	}
	alice, bob := newUser("alice"), newUser("bob")
	alice.signIn(ag.base, "alice-key")

	// The push page lists the dead letters, each with its button; the page
	// is drawn once per visit, so it is opened again until both are there.
	var rows int
	for deadline := time.Now().Add(20 * time.Second); ; {
		alice.do("open the push page", chromedp.Navigate(ag.base+"/console/#/tasks"), chromedp.Navigate(ag.base+"/console/#/push"),
			chromedp.WaitVisible(chromedp.CSS(`#view[data-loaded="push"]`)))
		if rows = eval[int](alice, `document.querySelectorAll("tr.dead-letter button.retry").length`); rows == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters on the push page after 20s, want 2", rows)
		}
		time.Sleep(100 * time.Millisecond) // polling, with a deadline
	}
	task := eval[string](alice, `document.querySelector("tr.dead-letter").dataset.taskId`)
	config := eval[string](alice, `document.querySelector("button.retry").dataset.configId`)
	alice.screenshot("push")

	// Without the CSRF token: refused, nothing stored.
	if status := eval[int](alice, fmt.Sprintf(`fetch("api/push/retry", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({task_id: %q, config_id: %q, seq: 1})}).then(r => r.status)`, task, config)); status != http.StatusForbidden {
		t.Errorf("a retry without the CSRF token: %d, want 403", status)
	}
	// Bob, with his own session and token, does not find alice's config.
	bob.signIn(ag.base, "bob-key")
	if status := eval[int](bob, fmt.Sprintf(`fetch("api/session").then(r => r.json()).then(me => fetch("api/push/retry", {method: "POST",
		headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf}, body: JSON.stringify({task_id: %q, config_id: %q, seq: 1})})).then(r => r.status)`,
		task, config)); status != http.StatusNotFound {
		t.Errorf("bob retries alice's dead letter: %d, want 404", status)
	}

	accept.Store(true)
	first := `tr.dead-letter[data-seq="1"]`
	alice.do("retry the first dead letter", chromedp.Click(chromedp.CSS(first+" button.retry")))
	id := fmt.Sprintf("%s/%s/1", task, config)
	for deadline := time.Now().Add(20 * time.Second); ; {
		mu.Lock()
		n := got[id]
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook did not get %s within 20s of the button; agent log:\n%s", id, ag.stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		alice.do("open the push page again", chromedp.Navigate(ag.base+"/console/#/tasks"), chromedp.Navigate(ag.base+"/console/#/push"),
			chromedp.WaitVisible(chromedp.CSS(`#view[data-loaded="push"]`)))
		if eval[int](alice, fmt.Sprintf(`document.querySelectorAll(%q).length`, first)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the retried dead letter is still on the push page after 20s")
		}
		time.Sleep(100 * time.Millisecond) // polling, with a deadline
	}
	if n := eval[int](alice, `document.querySelectorAll("tr.dead-letter").length`); n != 1 {
		t.Errorf("%d dead letters left on the page, want the other one", n)
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if got[id] != 1 || len(got) != 1 {
		t.Errorf("the webhook got %v, want %s exactly once", got, id)
	}
	if log := ag.stderr.String(); !strings.Contains(log, "push: retry requested") || !strings.Contains(log, "operator=key:alice") {
		t.Errorf("the agent's log does not say alice asked:\n%s", log)
	}
}
