package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/chromedp/chromedp"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// consoleConfig is an agent whose write-note skill needs an approval: alice
// and bob call it, ops approves.
func consoleConfig(mcpBin string) string {
	return fmt.Sprintf(`name: Notes
description: Notes behind approvals
log: {level: info}
limits: {shutdown_grace: 2s}
auth:
  api_keys: [{name: alice, sha256: %s}, {name: bob, sha256: %s}, {name: ops, sha256: %s}]
approvers: ["key:ops"]
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__write_note, effect: write, risk: high, approval: mandatory, redact: [text]}
  - {tool: notes__read_note, effect: read, risk: low, approval: none}
skills:
  - {id: write-note, name: Write a note, executor: mcp, tool: notes__write_note}
  - {id: read-note, name: Read a note, executor: mcp, tool: notes__read_note}
`, auth.HashAPIKey("alice-key"), auth.HashAPIKey("bob-key"), auth.HashAPIKey("ops-key"), mcpBin)
}

// browserUser is one person's browser: a BrowserContext of its own, so
// that each has its own cookies.
type browserUser struct {
	t    *testing.T
	name string
	ctx  context.Context
	shot string // where its screenshots go
}

// do runs steps in the user's tab, each batch bounded by 30 seconds.
func (u *browserUser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		peek, stop := context.WithTimeout(u.ctx, 5*time.Second)
		defer stop()
		page, _ := chromedp.Run(peek, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		u.t.Fatalf("%s: %s: %v\npage text:\n%s", u.name, what, err, page)
	}
}

// eval runs a script (a promise is awaited) and returns its value.
func eval[T any](u *browserUser, script string) T {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	if err != nil {
		u.t.Fatalf("%s: evaluate %s: %v", u.name, script, err)
	}
	return v
}

// screenshot saves the whole page as NAME.png in the user's screenshot
// directory.
func (u *browserUser) screenshot(name string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		u.t.Fatalf("%s: screenshot %s: %v", u.name, name, err)
	}
	path := filepath.Join(u.shot, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		u.t.Fatal(err)
	}
	u.t.Logf("screenshot %s", path)
}

// signIn opens the console and signs in with an API key.
func (u *browserUser) signIn(base, key string) {
	u.t.Helper()
	u.do("sign in",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("signin")),
		chromedp.SetValue(chromedp.ID("credential-kind"), "api_key"),
		chromedp.SendKeys(chromedp.ID("credential"), key),
		chromedp.Click(chromedp.ID("signin-button")),
		chromedp.WaitVisible(chromedp.ID("nav")),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
	)
}

// TestConsole drives the console in Debian's headless chromium: alice
// signs in with her API key and sees her task appear live as she sends it,
// opens its timeline, and watches it complete when ops, in a browser of his
// own, approves the waiting tool call with the button; bob, signed in too,
// sees none of alice's task; a change without the CSRF token is refused.
// Screenshots of the main pages are saved in the test's temporary
// directory, or in $HANDOFF_SCREENSHOTS when it is set.
func TestConsole(t *testing.T) {
	if _, err := exec.LookPath(chromiumPath); err != nil {
		t.Fatalf("%s is missing (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	shots := os.Getenv("HANDOFF_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	ag := launchAgent(t, "console", freeAddr(t), consoleConfig(buildMCPServer(t)))
	ag.waitReady()

	// The page itself: a strict policy, and no secret in it.
	resp, err := http.Get(ag.base + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") ||
		strings.Contains(csp, "unsafe") {
		t.Errorf("console page CSP %q, want a strict one", csp)
	}
	if !strings.Contains(string(page), "assets/app.js") {
		t.Errorf("console page: %s", page)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // starts the browser, for the life of the test
		t.Fatalf("start chromium: %v", err)
	}
	newUser := func(name string) *browserUser {
		ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		if err := chromedp.Do(ctx); err != nil { // its tab, without a timeout: the tab lives as long as this first run's ctx
			t.Fatalf("open a browser context for %s: %v", name, err)
		}
		return &browserUser{t: t, name: name, ctx: ctx, shot: shots}
	}
	alice, ops, bob := newUser("alice"), newUser("ops"), newUser("bob")

	alice.do("open the console", chromedp.Navigate(ag.base+"/console/"), chromedp.WaitVisible(chromedp.ID("signin")))
	alice.screenshot("signin")
	alice.signIn(ag.base, "alice-key")
	alice.do("see an empty task list", chromedp.WaitVisible(chromedp.ID("tasks-empty")))

	// The task appears on alice's open page as the engine commits it.
	id := sendWriteNote(t, ag.base, "alice-key", "shopping", "milk, eggs")
	row := fmt.Sprintf(`#tasks-table tr[data-task-id=%q]`, id)
	alice.do("see the task appear live", chromedp.WaitVisible(chromedp.CSS(row+` .state-TASK_STATE_INPUT_REQUIRED`)))
	alice.screenshot("tasks")
	if n := eval[int](alice, `document.querySelectorAll("#tasks-table tbody tr").length`); n != 1 {
		t.Errorf("alice's task list has %d rows, want 1", n)
	}
	if got := eval[string](alice, `document.getElementById("tasks-total").textContent`); got != "1 task(s)" {
		t.Errorf("alice's task count: %q", got)
	}

	// Its timeline: the events, the tool call waiting for approval.
	alice.do("open the timeline",
		chromedp.Click(chromedp.CSS(row+" a")),
		chromedp.WaitVisible(chromedp.CSS("#events tr.event-row")),
		chromedp.WaitVisible(chromedp.CSS("#task-state .state-TASK_STATE_INPUT_REQUIRED")),
		chromedp.WaitVisible(chromedp.CSS("#tool-calls table")),
	)
	if got := eval[string](alice, `document.getElementById("timeline").innerText`); strings.Contains(got, `"token"`) {
		t.Errorf("the timeline shows the approval token:\n%s", got)
	}
	if calls := eval[string](alice, `document.getElementById("tool-calls").innerText`); !strings.Contains(calls, "approval_required") ||
		!strings.Contains(calls, "notes__write_note") {
		t.Errorf("alice's timeline shows no waiting tool call:\n%s", calls)
	}

	// Bob sees nothing of it, in the list or by its id.
	bob.signIn(ag.base, "bob-key")
	bob.do("see his empty list", chromedp.WaitVisible(chromedp.ID("tasks-empty")))
	if n := eval[int](bob, fmt.Sprintf(`document.querySelectorAll(%q).length`, row)); n != 0 {
		t.Errorf("bob's task list shows alice's task")
	}
	if status := eval[int](bob, fmt.Sprintf(`fetch("api/tasks/%s").then(r => r.status)`, id)); status != http.StatusNotFound {
		t.Errorf("bob reads alice's task: %d, want 404", status)
	}
	if got := eval[string](bob, `fetch("api/approvals").then(r => r.text())`); strings.Contains(got, string(id)) {
		t.Errorf("bob, no approver, sees alice's approval: %s", got)
	}

	// Ops, an approver, sees the request with the redacted arguments.
	ops.signIn(ag.base, "ops-key")
	card := fmt.Sprintf(`.approval[data-task-id=%q]`, id)
	ops.do("open the approvals", chromedp.Navigate(ag.base+"/console/#/approvals"), chromedp.WaitVisible(chromedp.CSS(card+" button.approve")))
	text := eval[string](ops, fmt.Sprintf(`document.querySelector(%q).innerText`, card))
	for _, want := range []string{"notes__write_note", "high, write", "key:alice", "[REDACTED]", "shopping"} {
		if !strings.Contains(text, want) {
			t.Errorf("the approval card lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "milk, eggs") {
		t.Errorf("the approval card shows a redacted argument:\n%s", text)
	}
	ops.screenshot("approvals")

	// A change without the CSRF token is refused, and changes nothing.
	status := eval[int](ops, fmt.Sprintf(`fetch("api/approvals/%s", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({decision: "approve"})}).then(r => r.status)`, id))
	if status != http.StatusForbidden {
		t.Errorf("an approval without the CSRF token: %d, want 403", status)
	}
	if got := eval[string](ops, `fetch("api/approvals").then(r => r.text())`); !strings.Contains(got, string(id)) {
		t.Errorf("the task no longer waits after a refused request: %s", got)
	}

	// The button: alice's open timeline turns completed.
	ops.do("approve", chromedp.Click(chromedp.CSS(card+" button.approve")), chromedp.WaitVisible(chromedp.ID("approvals-empty")))
	alice.do("watch the task complete", chromedp.WaitVisible(chromedp.CSS("#task-state .state-TASK_STATE_COMPLETED")),
		chromedp.WaitVisible(chromedp.CSS("a.download")))
	alice.screenshot("timeline")
	if got := eval[string](alice, `document.getElementById("timeline").innerText`); !strings.Contains(got, "saved shopping") {
		t.Errorf("the completed timeline lacks the tool's result:\n%s", got)
	}
	if got := eval[string](alice, `fetch(document.querySelector("a.download").href).then(r => r.text())`); !strings.Contains(got, "saved shopping") {
		t.Errorf("the artifact download: %q", got)
	}
	audit := eval[string](ops, fmt.Sprintf(`fetch("api/reports/audit?task=%s").then(r => r.text())`, id))
	var recs struct {
		Records []struct{ Approver, Outcome string }
	}
	if err := json.Unmarshal([]byte(audit), &recs); err != nil || len(recs.Records) == 0 || recs.Records[0].Approver != "key:ops" ||
		recs.Records[0].Outcome != "success" {
		t.Errorf("the audit of the approved call: %s", audit)
	}

	// Deny, with a reason: alice's next task fails with it.
	denied := sendWriteNote(t, ag.base, "alice-key", "later", "not now")
	card = fmt.Sprintf(`.approval[data-task-id=%q]`, denied)
	ops.do("deny",
		chromedp.WaitVisible(chromedp.CSS(card+" button.deny")),
		chromedp.SendKeys(chromedp.CSS(card+" input"), "not on a Friday"),
		chromedp.Click(chromedp.CSS(card+" button.deny")),
		chromedp.WaitVisible(chromedp.ID("approvals-empty")),
	)
	got := eval[string](alice, fmt.Sprintf(`fetch("api/tasks/%s").then(r => r.json()).then(d => d.task.status.state + " " +
		d.task.status.message.parts.map(p => p.text).join(" "))`, denied))
	if !strings.HasPrefix(got, "TASK_STATE_FAILED") || !strings.Contains(got, "denied by key:ops: not on a Friday") {
		t.Errorf("the denied task: %s", got)
	}

	// The other pages render for the approver.
	for _, p := range []struct{ page, want string }{{"push", "No push configs."}, {"peers", "This agent has no peers."},
		{"ledger", "delegates no skill"}, {"mcp", "notes__write_note"}} {
		ops.do("open "+p.page, chromedp.Navigate(ag.base+"/console/#/"+p.page), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#view[data-loaded=%q]`, p.page))))
		if got := eval[string](ops, `document.getElementById("view").innerText`); !strings.Contains(got, p.want) {
			t.Errorf("the %s page lacks %q:\n%s", p.page, p.want, got)
		}
	}
	ops.screenshot("mcp")

	// Signing out ends the session on the server too.
	cookie := eval[string](alice, `fetch("api/session").then(r => r.status + "")`)
	if cookie != "200" {
		t.Errorf("alice's session: %s", cookie)
	}
	alice.do("sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin")))
	if got := eval[int](alice, `fetch("api/tasks").then(r => r.status)`); got != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d, want 401", got)
	}
}

// sendWriteNote asks the write-note skill as the key's caller and returns
// the task, which waits for an approval.
func sendWriteNote(t *testing.T, base, key, name, text string) string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-%s","role":"ROLE_USER",
		"metadata":{"handoff/skill":"write-note"},"parts":[{"data":{"name":%q,"text":%q}}]}}}`, name, name, text)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/a2a/jsonrpc", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Task struct {
				ID     string `json:"id"`
				Status struct{ State string }
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.Task.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("send write-note: %v %+v", err, out)
	}
	return out.Result.Task.ID
}

// TestConsoleDelegation: a delegated task's timeline shows its delegation
// record and the gate's decision with each check: the honest peer's commit
// with the verifier that passed, the contradicting peer's rejection with the
// check that failed; the ledger page lists the commit. The front agent
// takes anonymous callers, so the console signs in without a credential.
func TestConsoleDelegation(t *testing.T) {
	if _, err := exec.LookPath(chromiumPath); err != nil {
		t.Fatalf("%s is missing (apt-get install chromium; .ci/run installs it): %v", chromiumPath, err)
	}
	w := startDelegationWorld(t)
	front := jsonrpcClient(t, w.front)
	honest := sendTask(t, front, &a2a.SendMessageRequest{Message: skillMessage("honest", "count the notes")})
	contra := sendTask(t, front, &a2a.SendMessageRequest{Message: skillMessage("contra", "count the notes")})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860), chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	shots := os.Getenv("HANDOFF_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	u := &browserUser{t: t, name: "anonymous", ctx: ctx, shot: shots}
	u.do("open the console", chromedp.Navigate(w.front.base+"/console/"), chromedp.WaitVisible(chromedp.ID("signin")))
	if status := eval[int](u, `fetch("api/session", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}).then(r => r.status)`); status != http.StatusOK {
		t.Fatalf("anonymous sign-in: %d", status)
	}
	u.do("load the page signed in", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("nav")))
	for _, tc := range []struct {
		id   a2a.TaskID
		want []string
	}{
		{honest.ID, []string{"honest", "committed", "\u2713 verifier same-count"}},
		{contra.ID, []string{"contra", "rejected", "same-count"}},
	} {
		u.do("open the timeline of "+string(tc.id), chromedp.Navigate(w.front.base+"/console/#/task/"+string(tc.id)),
			chromedp.WaitVisible(chromedp.CSS("#delegations table")))
		got := eval[string](u, `document.getElementById("delegations").innerText`)
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("the delegations of %s lack %q:\n%s", tc.id, want, got)
			}
		}
	}
	u.screenshot("delegation")
	u.do("open the ledger", chromedp.Navigate(w.front.base+"/console/#/ledger"), chromedp.WaitVisible(chromedp.CSS(`#view[data-loaded="ledger"] table`)))
	if got := eval[string](u, `document.getElementById("view").innerText`); !strings.Contains(got, string(honest.ID)) || strings.Contains(got, string(contra.ID)) {
		t.Errorf("the ledger page lists %q, want the honest commit only", got)
	}
	u.screenshot("ledger")
}
