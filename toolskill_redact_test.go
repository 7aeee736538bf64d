package handoff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// lockedBuffer is a log sink safe for the agent's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// filesHolding lists the files under dir whose bytes contain secret.
func filesHolding(t *testing.T, dir, secret string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func redactConfig(t *testing.T, bin, events, dataDir string) *Config {
	t.Helper()
	c, err := ParseConfig("tools.yaml", strings.NewReader(fmt.Sprintf(`name: Tools
description: notes
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  anonymous: true
  api_keys: [{name: ops, sha256: %s}]
approvers: ["key:ops"]
capabilities: {push_notifications: true}
push: {allow_hosts: [127.0.0.1], retry_delay: 10ms, timeout: 500ms}
mcp_servers: [{name: notes, command: %q, args: [--events, %q]}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: none, redact: [name]}
  - {tool: notes__write_note, effect: write, risk: high, approval: mandatory, redact: [text]}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
  - {id: write-note, name: Write, executor: mcp, tool: notes__write_note}
`, auth.HashAPIKey("ops-key"), bin, events)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = dataDir
	return c
}

// approvalOf is the approval answering the approval request in an input-required task.
func approvalOf(t *testing.T, task map[string]any) string {
	t.Helper()
	for _, p := range task["status"].(map[string]any)["message"].(map[string]any)["parts"].([]any) {
		if d, ok := p.(map[string]any)["data"].(map[string]any); ok {
			if req, ok := d["approval_request"].(map[string]any); ok {
				a, _ := json.Marshal(map[string]any{"approval": map[string]any{
					"tool": req["tool"], "snapshot_version": req["snapshot_version"], "digest": req["digest"], "token": req["token"]}})
				return string(a)
			}
		}
	}
	t.Fatalf("no approval request in %v", task["status"])
	return ""
}

// TestToolSkillRedactsStoredMessages: a contract's redacted argument, given as a data
// member or as the text of a one-parameter tool, reaches the tool, but not the task
// store (tasks.db, WAL segments), GetTask's history, the audit or the log. A proposal
// waiting for approval when the agent restarts cannot be run from the redacted history:
// the approval then fails the task, and the tool is not called.
func TestToolSkillRedactsStoredMessages(t *testing.T) {
	const secret, secretName, later = "s3cret-note-7f3a", "s3cret-name-c41d", "s3cret-later-99b2"
	bin := buildMCPServer(t)
	events := filepath.Join(t.TempDir(), "events")
	dataDir := t.TempDir()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, url := serveAgent(t, redactConfig(t, bin, events, dataDir), WithLogger(logger))
	pushed := &lockedBuffer{} // every push body, one after another
	delivered := make(chan struct{}, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		pushed.Write(append(b, '\n'))
		select {
		case delivered <- struct{}{}:
		default:
		}
	}))
	defer hook.Close()

	write := func(id, name, text string) map[string]any {
		_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":%q,"role":"ROLE_USER",
			"metadata":{"handoff/skill":"write-note"},"parts":[{"data":{"name":%q,"text":%q}}]},
			"configuration":{"taskPushNotificationConfig":{"url":%q,"token":"tok-123456789"}}}`, id, name, text, hook.URL))
		return resultTask(t, out)
	}
	task := write("w1", "n1", secret)
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("write: %v", task)
	}
	id := task["id"].(string)
	_, out := call(t, url, "X-API-Key", "ops-key", "SendMessage",
		fmt.Sprintf(`{"message":{"messageId":"a1","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`, id, approvalOf(t, task)))
	if st := state(resultTask(t, out)); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("approved write: %v", out)
	}
	// The pipeline got the real value: the digest the approval was bound to covers it.
	// (Reading the note back would store the value as the read's result, which no
	// contract redacts.)
	sum := sha256.Sum256(fmt.Appendf(nil, `{"arguments":{"name":"n1","text":%q},"tool":"notes__write_note"}`, secret))
	if !strings.Contains(approvalOf(t, task), hex.EncodeToString(sum[:])) {
		t.Fatalf("the approval is not bound to the real arguments: %s", approvalOf(t, task))
	}
	// A text argument, redacted: the tool's error quoting it is scrubbed too.
	_, out = call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"r2","role":"ROLE_USER","parts":[{"text":%q}]}}`, secretName))
	readTask := resultTask(t, out)

	// GetTask: the history holds the redacted form.
	_, out = call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, id))
	got, _ := json.Marshal(out)
	if strings.Contains(string(got), secret) || !strings.Contains(string(got), `"text":"[REDACTED]"`) || !strings.Contains(string(got), `"name":"n1"`) {
		t.Fatalf("GetTask of the write: %s", got)
	}
	_, out = call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, readTask["id"]))
	got, _ = json.Marshal(out)
	if strings.Contains(string(got), secretName) || !strings.Contains(string(got), `[REDACTED]`) {
		t.Fatalf("GetTask of the read: %s", got)
	}
	// Push deliveries carry the stored events: the first (the task) redacted, up to the end.
	deadline := time.After(20 * time.Second)
	for !strings.Contains(pushed.String(), "TASK_STATE_COMPLETED") {
		select {
		case <-delivered:
		case <-deadline:
			t.Fatalf("no push of the completed write; pushed:\n%s", pushed.String())
		}
	}
	if p := pushed.String(); strings.Contains(p, secret) || !strings.Contains(p, `"text":"[REDACTED]"`) {
		t.Fatalf("push bodies:\n%s", p)
	}
	// The audit shows the calls, without the values.
	req, _ := http.NewRequest("GET", url+"/a2a/audit", nil)
	req.Header.Set("X-API-Key", "ops-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	audit, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(audit), "notes__write_note") || strings.Contains(string(audit), secret) || strings.Contains(string(audit), secretName) {
		t.Fatalf("audit: %s", audit)
	}

	// A write waiting for approval when the agent stops.
	task = write("w2", "n2", later)
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("second write: %v", task)
	}
	// Searched while the agent runs, with its write-ahead log, and once it stopped.
	if wal, _ := filepath.Glob(filepath.Join(dataDir, "tasks.db.wal-*")); len(wal) == 0 {
		t.Fatal("no WAL segment in the data directory: the search would miss the log")
	}
	unkept := func(when string) {
		for _, s := range []string{secret, secretName, later} {
			if files := filesHolding(t, dataDir, s); len(files) > 0 {
				t.Errorf("%s, the data directory holds a redacted value in %v", when, files)
			}
			if strings.Contains(logs.String(), s) {
				t.Errorf("%s, the log holds a redacted value:\n%s", when, logs.String())
			}
		}
	}
	unkept("while the agent runs")
	stopAgent(t, url)
	unkept("after the agent stopped")

	_, url = serveAgent(t, redactConfig(t, bin, events, dataDir), WithLogger(logger))
	_, out = call(t, url, "X-API-Key", "ops-key", "SendMessage",
		fmt.Sprintf(`{"message":{"messageId":"a2","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`, task["id"], approvalOf(t, task)))
	after := resultTask(t, out)
	if b, _ := json.Marshal(after); state(after) != "TASK_STATE_FAILED" || !strings.Contains(string(b), "send the request again") {
		t.Fatalf("approval after a restart: %s", b)
	}
	b, _ := os.ReadFile(events)
	if n := strings.Count(string(b), "start write_note"); n != 1 {
		t.Fatalf("write_note ran %d times, want once (the approval before the restart):\n%s", n, b)
	}
}

// TestToolSkillScrubsEchoedArguments: a tool's result that echoes a redacted argument
// (write_note answers "saved NAME") is kept with the value masked.
func TestToolSkillScrubsEchoedArguments(t *testing.T) {
	const secret = "s3cret-name-echo-2b"
	c, err := ParseConfig("tools.yaml", strings.NewReader(fmt.Sprintf(`name: Tools
description: notes
log: {level: error}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__write_note, effect: write, risk: low, approval: none, redact: [name]}
skills:
  - {id: write-note, name: Write, executor: mcp, tool: notes__write_note}
`, buildMCPServer(t))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)
	_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"w1","role":"ROLE_USER",
		"parts":[{"data":{"name":%q,"text":"hello"}}]}}`, secret))
	task := resultTask(t, out)
	b, _ := json.Marshal(task)
	if state(task) != "TASK_STATE_COMPLETED" || strings.Contains(string(b), secret) || !strings.Contains(string(b), "saved [REDACTED]") {
		t.Fatalf("write whose result echoes its redacted name: %s", b)
	}
	if files := filesHolding(t, c.DataDir, secret); len(files) > 0 {
		t.Fatalf("the data directory holds the redacted name in %v", files)
	}
}
