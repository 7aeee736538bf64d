package handoff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/redistest"
)

// serveScript serves the scripted model on a loopback port until the test
// ends and returns its base URL; seen receives each request's
// Authorization header.
func serveScript(t *testing.T, rules string, seen func(string)) string {
	base, _ := serveScriptServer(t, rules, seen)
	return base
}

// serveScriptServer is serveScript, with the server for its requests.
func serveScriptServer(t *testing.T, rules string, seen func(string)) (string, *script.Server) {
	t.Helper()
	s, err := script.Parse([]byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := script.NewServer(s)
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen != nil {
			seen(r.Header.Get("Authorization"))
		}
		srv.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String() + "/v1", srv
}

// modelSkillConfig is an agent with one model skill on the model at base.
func modelSkillConfig(t *testing.T, base, endpoint, section string) *Config {
	t.Helper()
	c, err := ParseConfig("model.yaml", strings.NewReader(fmt.Sprintf(`name: M
description: A model skill.
auth: {anonymous: true}
log: {level: error}
limits: {shutdown_grace: 1s}
models:
  - {name: m, base_url: %q, model: scripted, max_retries: 0, timeout: 5s%s}
skills:
  - id: ask
    name: Ask
    executor: model
    model: {use: m, instructions: Answer., %s}
`, base, endpoint, section)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	return c
}

// ask sends text to the agent at url and returns the task it ended with.
func ask(t *testing.T, url, text string) map[string]any {
	t.Helper()
	_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":%q}]}}`, "m-"+text, text))
	return resultTask(t, out)
}

func statusMessage(task map[string]any) string {
	b, _ := json.Marshal(task["status"])
	var s struct {
		Message struct{ Parts []struct{ Text string } }
	}
	_ = json.Unmarshal(b, &s)
	var out string
	for _, p := range s.Message.Parts {
		out += p.Text
	}
	return out
}

// TestModelSkillFailsClearly: a model that answers garbage or never
// finishes fails the task with a status message saying which.
func TestModelSkillFailsClearly(t *testing.T) {
	for _, tc := range []struct {
		name, rules, section, want string
	}{
		{"no choices", "rules: [{no_choices: true}]\n", "", "The model answered with no choices."},
		{"max turns", "rules: [{calls: [{tool: nowhere__tool, arguments: {}, force: true}]}]\n", "max_turns: 2", "The model did not finish within max_turns (2)."},
		{"server error", "rules: [{fail: {status: 500}}]\n", "", "The model skill failed: model turn 1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := startAgent(t, modelSkillConfig(t, serveScript(t, tc.rules, nil), "", tc.section))
			task := ask(t, url, "hello")
			if state(task) != "TASK_STATE_FAILED" || !strings.HasPrefix(statusMessage(task), tc.want) {
				t.Fatalf("task %s %q, want failed %q", state(task), statusMessage(task), tc.want)
			}
		})
	}
}

// TestModelSkillKeyStaysSecret: the API key is read only from the variable
// api_key_env names (New refuses to start without it, naming the variable),
// reaches the model as the bearer token, and appears in no log line and no
// task state.
func TestModelSkillKeyStaysSecret(t *testing.T) {
	const key = "sk-handoff-test-0123456789"
	var mu sync.Mutex
	var auths []string
	base := serveScript(t, "rules: [{say: \"hi\"}]\n", func(a string) { mu.Lock(); auths = append(auths, a); mu.Unlock() })
	c := modelSkillConfig(t, base, ", api_key_env: HANDOFF_TEST_MODEL_KEY", "")
	if _, err := New(t.Context(), c); err == nil || !strings.Contains(err.Error(), "models[0].api_key_env: the variable HANDOFF_TEST_MODEL_KEY is not set") {
		t.Fatalf("New without the variable: %v", err)
	}
	t.Setenv("HANDOFF_TEST_MODEL_KEY", key)
	var logs bytes.Buffer
	var logMu sync.Mutex
	_, url := serveAgent(t, c, WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	task := ask(t, url, "hello")
	if state(task) != "TASK_STATE_COMPLETED" {
		t.Fatalf("task %s %q", state(task), statusMessage(task))
	}
	_, out := call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q,"historyLength":50}`, task["id"]))
	b, _ := json.Marshal(out)
	logMu.Lock()
	logged := logs.String()
	logMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(auths) != 1 || auths[0] != "Bearer "+key {
		t.Errorf("the model got Authorization %q, want the key as a bearer token", auths)
	}
	if strings.Contains(string(b), key) || strings.Contains(logged, key) {
		t.Errorf("the key leaked: task %s, logs %s", b, logged)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestModelSkillWarnsUnmatchedGlobs: once the MCP servers connected, a
// model skill's tools glob that matches no tool is a warning naming the
// skill and the glob (servers come and go: not an error), and a glob that
// matches is not.
func TestModelSkillWarnsUnmatchedGlobs(t *testing.T) {
	bin := buildMCPServer(t)
	c, err := ParseConfig("model.yaml", strings.NewReader(fmt.Sprintf(`name: M
description: A model skill.
auth: {anonymous: true}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
models: [{name: m, base_url: "http://127.0.0.1:9/v1", model: scripted}]
skills:
  - id: ask
    name: Ask
    executor: model
    model: {use: m, instructions: Answer., tools: ["notes__read_*", "calendar__*"]}
`, bin)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	var logs bytes.Buffer
	var mu sync.Mutex
	serveAgent(t, c, WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := logs.String()
		mu.Unlock()
		if strings.Contains(got, "matches no tool") {
			if !strings.Contains(got, "skill=ask glob=calendar__*") || strings.Contains(got, "notes__read_*") {
				t.Fatalf("warnings %q: want calendar__* only", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warning about calendar__*: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestModelSkillStateOnRedis: on a Redis store the conversation of a task
// waiting for an approval is a Redis key of the store's namespace (another
// replica may continue it), no executor-state.db is made in the data
// directory, and the key is gone once the task ended.
func TestModelSkillStateOnRedis(t *testing.T) {
	bin := buildMCPServer(t)
	ns := redistest.Namespace(t, "handoff-test-")
	base := serveScript(t, `rules:
  - when: {last: user}
    calls: [{tool: notes__write_note, arguments: {name: memo, text: "{{.User}}"}}]
  - say: "Done: {{.Result}}"
`, nil)
	c, err := ParseConfig("model.yaml", strings.NewReader(fmt.Sprintf(`name: M
description: A model skill.
auth:
  anonymous: true
  api_keys: [{name: ops, sha256: %s}]
approvers: ["key:ops"]
log: {level: error}
limits: {shutdown_grace: 1s}
store: {kind: redis, url: "redis://127.0.0.1:6379/0", namespace: %q, secret_key_files: [%q], artifacts_dir: %q}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__write_note, effect: write, risk: low, approval: mandatory}]
models: [{name: m, base_url: %q, model: scripted, max_retries: 0}]
skills:
  - id: ask
    name: Ask
    executor: model
    model: {use: m, instructions: Keep notes., tools: ["notes__write_note"]}
`, auth.HashAPIKey("ops-key"), ns, secretFile(t), t.TempDir(), bin, base)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	_, url := serveAgent(t, c)
	task := ask(t, url, "lunch at noon")
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("task %s %q, want input-required", state(task), statusMessage(task))
	}
	rdb := redistest.Client(t)
	key := "handoff:{" + ns + "}:state:model/" + task["id"].(string)
	stored, err := rdb.Get(t.Context(), key).Result()
	if err != nil || !strings.Contains(stored, "Keep notes.") {
		t.Fatalf("the conversation in Redis (%s): %q, %v", key, stored, err)
	}
	if _, err := os.Stat(filepath.Join(c.DataDir, datadir.ExecutorState)); !os.IsNotExist(err) {
		t.Errorf("%s exists on a Redis store (%v)", datadir.ExecutorState, err)
	}
	var req map[string]any
	for _, p := range task["status"].(map[string]any)["message"].(map[string]any)["parts"].([]any) {
		if d, ok := p.(map[string]any)["data"].(map[string]any); ok {
			req, _ = d["approval_request"].(map[string]any)
		}
	}
	a, _ := json.Marshal(map[string]any{"approval": req})
	_, out := call(t, url, "X-API-Key", "ops-key", "SendMessage",
		fmt.Sprintf(`{"message":{"messageId":"a1","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`, task["id"], a))
	if st := state(resultTask(t, out)); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("after the approval: %s, want completed", st)
	}
	if n, err := rdb.Exists(t.Context(), key).Result(); err != nil || n != 0 {
		t.Errorf("the conversation is still in Redis after the task ended (%d, %v)", n, err)
	}
}

// TestModelSkillFilesBesideConfig: instructions_file and skills_dir are
// read beside the config file; the model is offered the skills by name and
// description (not their bodies) with activate_skill, which loads a body;
// a malformed SKILL.md is skipped with a warning naming it.
func TestModelSkillFilesBesideConfig(t *testing.T) {
	base, srv := serveScriptServer(t, `rules:
  - when: {last: user, offered: activate_skill}
    calls: [{tool: activate_skill, arguments: {name: tidy-notes}}]
  - when: {last: tool, after: activate_skill}
    say: "Loaded: {{.Result}}"
`, nil)
	dir := t.TempDir()
	files := map[string]string{
		"prompt.md":                  "You keep the team's notes tidy.",
		"skills/tidy-notes/SKILL.md": "---\nname: tidy-notes\ndescription: How to tidy a note.\n---\nFirst read the note, then rewrite it shorter.\n",
		"skills/broken/SKILL.md":     "no frontmatter here\n",
		"agent.yaml": fmt.Sprintf(`name: M
description: A model skill.
auth: {anonymous: true}
limits: {shutdown_grace: 1s}
models: [{name: m, base_url: %q, model: scripted, max_retries: 0}]
skills:
  - id: ask
    name: Ask
    executor: model
    model: {use: m, instructions_file: prompt.md, skills_dir: skills}
`, base),
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(t.TempDir()) // the files are found beside the config, not in the working directory
	c, err := LoadConfig(filepath.Join(dir, "agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	var logs bytes.Buffer
	var mu sync.Mutex
	_, url := serveAgent(t, c, WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	task := ask(t, url, "tidy the welcome note")
	if state(task) != "TASK_STATE_COMPLETED" {
		t.Fatalf("task %s %q", state(task), statusMessage(task))
	}
	if !strings.Contains(statusMessage(task), "First read the note, then rewrite it shorter.") {
		t.Errorf("the answer %q does not quote the activated skill's body", statusMessage(task))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	first := string(reqs[0])
	if !strings.Contains(first, "You keep the team's notes tidy.") || !strings.Contains(first, "tidy-notes: How to tidy a note.") ||
		strings.Contains(first, "rewrite it shorter") || !strings.Contains(first, `"activate_skill"`) {
		t.Errorf("the first request %s: want the instructions file, the skill's name and description, activate_skill, and no body", first)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "broken/SKILL.md") {
		t.Errorf("no warning names the malformed SKILL.md: %q", logs.String())
	}
}

// TestModelSkillSeesOnlyEntitledTools: the tools a model is shown are the
// skill's globs intersected with what the policy lets the caller use: a
// rule denying ops notes__slow whatever the arguments hides it from ops's
// model, not from an anonymous caller's; a rule with a condition hides
// nothing (the arguments decide it, at the call).
func TestModelSkillSeesOnlyEntitledTools(t *testing.T) {
	base, srv := serveScriptServer(t, "rules:\n  - when: {last: user}\n    say: done\n", nil)
	c, err := ParseConfig("entitled.yaml", strings.NewReader(outputAgentHead(buildMCPServer(t))+fmt.Sprintf(`models: [{name: m, base_url: %q, model: scripted, max_retries: 0}]
policy:
  rules:
    - {id: no-slow-for-ops, layer: immutable, principals: ["key:ops"], tools: [notes__slow]}
    - {id: big-stats, layer: tenant, tools: [notes__stats], when: "args.size > 10"}
skills:
  - {id: ask, name: Ask, executor: model, model: {use: m, instructions: Answer., tools: ["notes__s*"]}}
`, base)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	_, url := serveAgent(t, c)
	for _, who := range []struct{ header, value string }{{"", ""}, {"X-API-Key", "ops-key"}} {
		_, out := call(t, url, who.header, who.value, "SendMessage", `{"message":{"messageId":"m-`+who.value+`","role":"ROLE_USER","parts":[{"text":"hi"}]}}`)
		if task := resultTask(t, out); state(task) != "TASK_STATE_COMPLETED" {
			t.Fatalf("caller %q: task %s %q", who.value, state(task), statusMessage(task))
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	anon, ops := string(reqs[0]), string(reqs[1])
	if !strings.Contains(anon, `"notes__stats"`) || !strings.Contains(anon, `"notes__slow"`) {
		t.Errorf("the anonymous caller's model was shown %s; want notes__stats and notes__slow", anon)
	}
	if !strings.Contains(ops, `"notes__stats"`) || strings.Contains(ops, `"notes__slow"`) {
		t.Errorf("ops's model was shown %s; want notes__stats and not notes__slow", ops)
	}
}

// TestModelSkillSearchesContractTags: a tool contract's tags are what
// tool search ranks by besides names and descriptions: a query of a word
// only the tags hold finds the tool.
func TestModelSkillSearchesContractTags(t *testing.T) {
	base, srv := serveScriptServer(t, `rules:
  - when: {last: user, offered: search_tools}
    calls: [{tool: search_tools, arguments: {query: inventory}}]
  - when: {last: tool, after: search_tools}
    say: searched
`, nil)
	head := strings.Replace(outputAgentHead(buildMCPServer(t)), "  - {tool: notes__stats, effect: read, risk: low, approval: none}",
		"  - {tool: notes__stats, effect: read, risk: low, approval: none, tags: [inventory, census]}", 1)
	c, err := ParseConfig("tags.yaml", strings.NewReader(head+fmt.Sprintf(`models: [{name: m, base_url: %q, model: scripted, max_retries: 0}]
skills:
  - {id: ask, name: Ask, executor: model, model: {use: m, instructions: Answer., tools: ["notes__s*"], schema_budget_tokens: 1}}
`, base)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	_, url := serveAgent(t, c)
	if task := ask(t, url, "find it"); state(task) != "TASK_STATE_COMPLETED" {
		t.Fatalf("task %s %q", state(task), statusMessage(task))
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	var second struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1], &second); err != nil {
		t.Fatal(err)
	}
	found := ""
	for _, m := range second.Messages {
		if m.Role == "tool" {
			found = m.Content
		}
	}
	if !strings.Contains(found, "notes__stats") || strings.Contains(found, "notes__slow") {
		t.Errorf("search_tools(inventory) answered %s; want notes__stats (by its tags) alone", found)
	}
}
