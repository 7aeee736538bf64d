package handoff

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/push"
)

// postRetry POSTs body to /a2a/push/retry and returns the status and body.
func postRetry(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/a2a/push/retry", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitPush polls the push status until ok holds for the one config.
func waitPush(t *testing.T, url, what string, ok func(push.Status) bool) push.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := pushStatuses(t, url)
		if len(st) == 1 && ok(st[0]) {
			return st[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, want %s: %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// TestPushRetryDeadLetters: at max_attempts 1, a webhook that refuses
// dead-letters each of a task's four events; once it accepts, POST
// /a2a/push/retry sends one dead letter, then the rest, each received
// exactly once, in the order asked; the dead letters are gone and
// handoff_push_retries_total counts four. Bad requests are refused with
// what is wrong. On both stores.
func TestPushRetryDeadLetters(t *testing.T) {
	for _, store := range []string{"bolt", "redis"} {
		t.Run(store, func(t *testing.T) {
			extra := ""
			if store == "redis" {
				extra = fmt.Sprintf("store: {kind: redis, url: %q, namespace: %q, secret_key_files: [%q]}\n", redistest.URL, redistest.Namespace(t, "handoff-test-"), secretFile(t))
			}
			c, err := ParseConfig("push.yaml", strings.NewReader(minimalConfig+extra+
				"log: {level: error}\nlimits: {shutdown_grace: 1s}\ncapabilities: {push_notifications: true}\n"+
				"push: {allow_hosts: [127.0.0.1], retry_delay: 10ms, timeout: 500ms, max_attempts: 1}\n"))
			if err != nil {
				t.Fatal(err)
			}
			c.DataDir = t.TempDir()
			url := startAgent(t, c)
			r := newReceiver(t, url, 1<<30) // refuses until told to accept
			if status, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"tck-stream-001-r","role":"ROLE_USER","parts":[{"text":"hi"}]},
				"configuration":{"taskPushNotificationConfig":{"url":%q,"token":"tok-123456789"}}}`, r.srv.URL+"/hook")); status != http.StatusOK || out["result"] == nil {
				t.Fatalf("send: %d %v", status, out)
			}
			st := waitPush(t, url, "four dead letters", func(s push.Status) bool { return len(s.Dead) == 4 })
			task, config := string(st.TaskID), st.ConfigID

			for _, c := range []struct {
				body   string
				status int
				says   string
			}{
				{`{"task_id":"` + task + `","config_id":"` + config + `","sequence":1}`, http.StatusBadRequest, `unknown field "sequence"`},
				{`{"task_id":"` + task + `"}`, http.StatusBadRequest, "config_id are required"},
				{`{"task_id":"` + task + `","config_id":"nope","seq":1}`, http.StatusNotFound, `no push config "nope"`},
				{`{"task_id":"` + task + `","config_id":"` + config + `","seq":9}`, http.StatusConflict, "event 9 of config"},
			} {
				if status, body := postRetry(t, url, c.body); status != c.status || !strings.Contains(body, c.says) {
					t.Errorf("retry %s: %d %s, want %d saying %q", c.body, status, body, c.status, c.says)
				}
			}

			r.mu.Lock()
			r.fail = 0
			r.mu.Unlock()
			if status, body := postRetry(t, url, `{"task_id":"`+task+`","config_id":"`+config+`","seq":1}`); status != http.StatusAccepted ||
				!strings.Contains(body, `"by":"anonymous"`) {
				t.Fatalf("retry event 1: %d %s", status, body)
			}
			if got := r.wait(t, 1); got[0] != "task:TASK_STATE_SUBMITTED" {
				t.Fatalf("received %v, want the task's first event", got)
			}
			waitPush(t, url, "three dead letters", func(s push.Status) bool { return len(s.Dead) == 3 && len(s.Retries) == 0 })
			if status, body := postRetry(t, url, `{"task_id":"`+task+`","config_id":"`+config+`"}`); status != http.StatusAccepted {
				t.Fatalf("retry every dead letter: %d %s", status, body)
			}
			want := "task:TASK_STATE_SUBMITTED,status:TASK_STATE_WORKING,artifactUpdate,status:TASK_STATE_COMPLETED"
			if got := strings.Join(r.wait(t, 4), ","); got != want {
				t.Fatalf("received %s, want %s", got, want)
			}
			st = waitPush(t, url, "no dead letter, no request", func(s push.Status) bool { return len(s.Dead) == 0 && len(s.Retries) == 0 })
			if st.Delivered != 4 {
				t.Errorf("status %+v, want 4 delivered", st)
			}
			if status, body := postRetry(t, url, `{"task_id":"`+task+`","config_id":"`+config+`","seq":1}`); status != http.StatusConflict {
				t.Errorf("retry of a delivered event: %d %s, want 409", status, body)
			}
			time.Sleep(200 * time.Millisecond)
			r.mu.Lock()
			n, dups := len(r.events), r.dups
			r.mu.Unlock()
			if n != 4 || dups != 0 {
				t.Errorf("received %d events with %d duplicates, want each of 4 once", n, dups)
			}
			fams := scrape(t, url+"/metrics", "", "")
			if got := value(fams, "handoff_push_retries_total", "outcome", "delivered"); got != 4 {
				t.Errorf("handoff_push_retries_total{outcome=delivered} = %v, want 4", got)
			}
			if got := value(fams, "handoff_push_attempts_total", "outcome", "dead"); got != 4 {
				t.Errorf("handoff_push_attempts_total{outcome=dead} = %v, want 4", got)
			}
		})
	}
}
