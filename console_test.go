package handoff

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// consoleClient is a browser-like client of one agent's console: a cookie
// jar and the CSRF token of its session.
type consoleClient struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string
}

func newConsoleClient(t *testing.T, base string) *consoleClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleClient{t: t, base: base, hc: &http.Client{Jar: jar}}
}

// do sends one request to the console's API with the given headers and
// returns the status, the response and its body.
func (c *consoleClient) do(method, path, body string, header map[string]string) (int, *http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+"/console/api/"+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp, string(b)
}

// signIn signs in with an API key and keeps the session's CSRF token.
func (c *consoleClient) signIn(key string) *http.Response {
	c.t.Helper()
	status, resp, body := c.do("POST", "session", fmt.Sprintf(`{"api_key":%q}`, key), map[string]string{"Content-Type": "application/json"})
	if status != http.StatusOK {
		c.t.Fatalf("sign in: %d %s", status, body)
	}
	if strings.Contains(body, key) {
		c.t.Errorf("the sign-in answer holds the key: %s", body)
	}
	var me struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &me); err != nil || me.CSRF == "" {
		c.t.Fatalf("sign in: %s", body)
	}
	c.csrf = me.CSRF
	return resp
}

func (c *consoleClient) post(path, body string) (int, string) {
	c.t.Helper()
	status, _, b := c.do("POST", path, body, map[string]string{"Content-Type": "application/json", "X-CSRF-Token": c.csrf})
	return status, b
}

// TestConsoleSession: signing in gives an HttpOnly, SameSite=Strict
// session cookie (Secure only when the agent is reached over https), never
// echoes the credential, and refuses a bad key, a cross-site origin and a
// form post; a change needs the session's CSRF token.
func TestConsoleSession(t *testing.T) {
	bin := buildMCPServer(t)
	for _, tc := range []struct {
		name, publicURL string
		secure          bool
	}{{"http", "", false}, {"https public_url", "https://agent.example", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := redactConfig(t, bin, filepath.Join(t.TempDir(), "events"), t.TempDir())
			c.PublicURL = tc.publicURL
			cc := newConsoleClient(t, startAgent(t, c))
			resp := cc.signIn("ops-key")
			var ck *http.Cookie
			for _, k := range resp.Cookies() {
				if k.Name == "handoff_console" {
					ck = k
				}
			}
			if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" || ck.MaxAge <= 0 || ck.Secure != tc.secure {
				t.Errorf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/console, expiring, Secure=%v", ck, tc.secure)
			}

			json := map[string]string{"Content-Type": "application/json"}
			for name, h := range map[string]map[string]string{
				"a bad key":  json,
				"cross-site": {"Content-Type": "application/json", "Origin": "https://evil.example"},
				"a form":     {"Content-Type": "application/x-www-form-urlencoded"},
			} {
				body := `{"api_key":"ops-key"}`
				if name == "a bad key" {
					body = `{"api_key":"wrong"}`
				}
				if status, _, b := newConsoleClient(t, cc.base).do("POST", "session", body, h); status != http.StatusUnauthorized && status != http.StatusForbidden {
					t.Errorf("sign-in with %s: %d %s, want refused", name, status, b)
				}
			}

			decide := `{"decision":"approve"}`
			for name, h := range map[string]map[string]string{
				"no token":    json,
				"wrong token": {"Content-Type": "application/json", "X-CSRF-Token": "x" + cc.csrf},
			} {
				if status, _, b := cc.do("POST", "approvals/t1", decide, h); status != http.StatusForbidden {
					t.Errorf("a decision with %s: %d %s, want 403", name, status, b)
				}
			}
			if status, b := cc.post("approvals/t1", decide); status != http.StatusBadRequest || !strings.Contains(b, "waits for no approval") {
				t.Errorf("a decision with the token, on no waiting task: %d %s", status, b)
			}
			if status, _, _ := newConsoleClient(t, cc.base).do("GET", "tasks", "", nil); status != http.StatusUnauthorized {
				t.Errorf("tasks without a session: %d, want 401", status)
			}
		})
	}
}

// TestConsoleDeny: the console's Deny fails the waiting task with the
// approver's reason, through the same approval path as the CLI, and the
// owner's task says so.
func TestConsoleDeny(t *testing.T) {
	bin := buildMCPServer(t)
	url := startAgent(t, redactConfig(t, bin, filepath.Join(t.TempDir(), "events"), t.TempDir()))
	_, out := call(t, url, "", "", "SendMessage", `{"message":{"messageId":"w1","role":"ROLE_USER",
		"metadata":{"handoff/skill":"write-note"},"parts":[{"data":{"name":"n1","text":"hello"}}]}}`)
	id := resultTask(t, out)["id"].(string)

	ops := newConsoleClient(t, url)
	ops.signIn("ops-key")
	if status, b := ops.post("approvals/"+id, `{"decision":"approve","scope":"task"}`); status != http.StatusBadRequest {
		t.Errorf("scope task: %d %s, want refused until grants exist", status, b)
	}
	status, b := ops.post("approvals/"+id, `{"decision":"deny","reason":"no notes today"}`)
	if status != http.StatusOK || !strings.Contains(b, "TASK_STATE_FAILED") {
		t.Fatalf("deny: %d %s", status, b)
	}
	_, out = call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, id))
	task, _ := json.Marshal(out["result"])
	if !strings.Contains(string(task), "TASK_STATE_FAILED") || !strings.Contains(string(task), "denied by key:ops: no notes today") {
		t.Errorf("the denied task: %s", task)
	}
}

// TestConsoleOff: console.enabled false serves no console; the default
// serves it under a strict Content-Security-Policy.
func TestConsoleOff(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{{"", http.StatusOK}, {"console: {enabled: false}\n", http.StatusNotFound}} {
		c, err := ParseConfig("c.yaml", strings.NewReader("name: A\ndescription: B\nlog: {level: error}\nlimits: {shutdown_grace: 1s}\n"+
			"auth: {anonymous: true}\nskills: [{id: s, name: S, executor: tck}]\n"+tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = t.TempDir()
		resp, err := http.Get(startAgent(t, c) + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%q: GET /console/ %d, want %d", tc.yaml, resp.StatusCode, tc.want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); tc.want == http.StatusOK && !strings.HasPrefix(csp, "default-src 'none'") {
			t.Errorf("console CSP %q", csp)
		}
	}
	if _, err := ParseConfig("c.yaml", strings.NewReader("name: A\ndescription: B\nauth: {anonymous: true}\nskills: [{id: s, name: S, executor: tck}]\n"+
		"console: {session_ttl: 5s}\n")); err == nil || !strings.Contains(err.Error(), "console.session_ttl") {
		t.Errorf("a 5s session_ttl: %v", err)
	}
}

// TestConsoleStreamEndsAtShutdown: an open console page does not hold the
// agent's shutdown to its drain deadline (shutdown_grace + 5s): its live
// stream ends when the server shuts down.
func TestConsoleStreamEndsAtShutdown(t *testing.T) {
	c, err := ParseConfig("c.yaml", strings.NewReader("name: A\ndescription: B\nlog: {level: error}\nlimits: {shutdown_grace: 1s}\n"+
		"auth: {api_keys: [{name: ops, sha256: "+auth.HashAPIKey("ops-key")+"}]}\nskills: [{id: s, name: S, executor: tck}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)
	cc := newConsoleClient(t, url)
	cc.signIn("ops-key")
	req, err := http.NewRequestWithContext(t.Context(), "GET", url+"/console/api/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cc.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); ended <- err }()
	start := time.Now()
	stopAgent(t, url)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("shutdown with an open console stream took %s, want well under the 6s drain deadline", took)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Error("the console stream is still open after the agent stopped")
	}
}

// TestConsoleTasksPages: the tasks page lists the caller's tasks newest
// first, in pages, filtered by state, and none of another caller's.
func TestConsoleTasksPages(t *testing.T) {
	c, err := ParseConfig("c.yaml", strings.NewReader(fmt.Sprintf("name: A\ndescription: B\nlog: {level: error}\nlimits: {shutdown_grace: 1s}\n"+
		"auth: {api_keys: [{name: ops, sha256: %s}, {name: bob, sha256: %s}]}\nskills: [{id: s, name: S, executor: tck}]\n",
		auth.HashAPIKey("ops-key"), auth.HashAPIKey("bob-key"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)
	var ids []string
	for i, prefix := range []string{"tck-complete-task", "tck-input-required", "tck-complete-task"} {
		_, out := call(t, url, "X-API-Key", "ops-key", "SendMessage",
			fmt.Sprintf(`{"message":{"messageId":"%s-%d","role":"ROLE_USER","parts":[{"text":"hi"}]}}`, prefix, i))
		ids = append(ids, resultTask(t, out)["id"].(string))
	}
	_, out := call(t, url, "X-API-Key", "bob-key", "SendMessage", `{"message":{"messageId":"tck-complete-task-bob","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
	bobs := resultTask(t, out)["id"].(string)

	ops := newConsoleClient(t, url)
	ops.signIn("ops-key")
	type page struct {
		Tasks []struct {
			ID, State string
		}
		Total    int
		NextPage string `json:"next_page"`
	}
	list := func(query string) page {
		t.Helper()
		status, _, b := ops.do("GET", "tasks?"+query, "", nil)
		var p page
		if status != http.StatusOK || json.Unmarshal([]byte(b), &p) != nil {
			t.Fatalf("tasks?%s: %d %s", query, status, b)
		}
		return p
	}
	first := list("size=2")
	if len(first.Tasks) != 2 || first.Total != 3 || first.NextPage == "" || first.Tasks[0].ID != ids[2] || first.Tasks[1].ID != ids[1] {
		t.Errorf("first page: %+v, want the newest two of three", first)
	}
	second := list("size=2&page=" + first.NextPage)
	if len(second.Tasks) != 1 || second.Tasks[0].ID != ids[0] || second.NextPage != "" {
		t.Errorf("second page: %+v, want the oldest", second)
	}
	waiting := list("state=TASK_STATE_INPUT_REQUIRED")
	if len(waiting.Tasks) != 1 || waiting.Tasks[0].ID != ids[1] {
		t.Errorf("input-required: %+v", waiting)
	}
	for _, p := range []page{first, second, list("")} {
		for _, task := range p.Tasks {
			if task.ID == bobs {
				t.Errorf("ops's list holds bob's task")
			}
		}
	}
	if status, _, _ := ops.do("GET", "tasks/"+bobs, "", nil); status != http.StatusNotFound {
		t.Errorf("ops reads bob's task: %d, want 404", status)
	}
	if status, _, _ := ops.do("GET", "tasks?size=500", "", nil); status != http.StatusBadRequest {
		t.Errorf("size=500: %d, want 400", status)
	}
}
