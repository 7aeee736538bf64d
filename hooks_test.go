package handoff

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hookLines reads the JSON lines the recording hooks appended to path.
func hookLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestObservingHooksThroughTheAgent: a real agent runs its task_created, task_finished and
// gate_decided hooks, as commands and as http POSTs to a receiver on 127.0.0.1 (through
// the push guard, allowed by push.allow_hosts): each fires once per task or decision, with
// the task's or the delegation's fields, in the order created, gate, finished. Observers
// that exit 1, time out or are missing leave the tasks as they would be and log a line.
func TestObservingHooksThroughTheAgent(t *testing.T) {
	common, peer := startNotesPeer(t)
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	hook := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	record := hook("record", `read -r line; printf '%s\n' "$line" >> "`+seen+`"`)
	var posted struct {
		sync.Mutex
		events []map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev map[string]any
		_ = json.Unmarshal(body, &ev)
		posted.Lock()
		posted.events = append(posted.events, ev)
		posted.Unlock()
	}))
	t.Cleanup(srv.Close)

	c, err := ParseConfig("front.yaml", strings.NewReader("name: Front\ndescription: delegates\n"+
		strings.Replace(common, "log: {level: error}", "log: {level: info}", 1)+fmt.Sprintf(`peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
push: {allow_hosts: [127.0.0.1]}
skills:
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
  - {id: contradicted, name: C, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
policy:
  hooks:
    - {name: created, point: task_created, command: %q}
    - {name: broken, point: task_created, command: %q}
    - {name: gate, point: gate_decided, command: %q}
    - {name: web-gate, point: gate_decided, url: %q}
    - {name: slow, point: task_finished, command: %q, timeout: 300ms}
    - {name: missing, point: task_finished, command: %q}
    - {name: finished, point: task_finished, command: %q}
`, peer, peer+"/.well-known/",
		writeContract(t, dir, "honest", "/notes", "result.notes == evidence.notes__stats.notes"),
		writeContract(t, dir, "contradicted", "/notes", "result.notes == evidence.notes__stats.notes + 1.0"),
		record, hook("broken", "exit 1"), record, srv.URL+"/gate", hook("slow", "sleep 10"), filepath.Join(dir, "no-such-hook"), record)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	var logs syncBuffer
	_, front := serveTools(t, c, &logs)

	ids := map[string]string{} // skill -> task id
	for skill, want := range map[string]string{"honest": "TASK_STATE_COMPLETED", "contradicted": "TASK_STATE_FAILED"} {
		_, out := call(t, front, "", "", "SendMessage", fmt.Sprintf(
			`{"message":{"messageId":"m-%s","role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"data":{}}]}}`, skill, skill))
		task := resultTask(t, out)
		if state(task) != want {
			t.Fatalf("%s: %s %v, want %s (a failing observer changed the task?)", skill, state(task), task["status"], want)
		}
		ids[skill] = task["id"].(string)
	}
	var lines []map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		lines = hookLines(t, seen)
		posted.Lock()
		n := len(posted.events)
		posted.Unlock()
		if len(lines) >= 6 && n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hooks ran %d commands and %d posts, want 6 and 2: %v", len(lines), n, lines)
		}
	}
	time.Sleep(200 * time.Millisecond) // any extra run would show now
	lines = hookLines(t, seen)
	if len(lines) != 6 {
		t.Fatalf("%d command runs, want 6 (each point once per task): %v", len(lines), lines)
	}
	for skill, id := range ids {
		var order []string
		var byPoint = map[string]map[string]any{}
		for _, l := range lines {
			if l["task_id"] == id {
				order = append(order, l["point"].(string))
				byPoint[l["point"].(string)] = l
			}
		}
		if want := []string{"task_created", "gate_decided", "task_finished"}; !slices.Equal(order, want) {
			t.Errorf("%s: points %v, want %v", skill, order, want)
			continue
		}
		created, gate, finished := byPoint["task_created"], byPoint["gate_decided"], byPoint["task_finished"]
		if created["hook"] != "created" || created["skill"] != skill || created["principal"] != "anonymous" || created["context_id"] == "" ||
			created["state"] != "TASK_STATE_SUBMITTED" || created["time"] == nil {
			t.Errorf("%s: task_created %v", skill, created)
		}
		if finished["context_id"] != created["context_id"] || finished["skill"] != skill {
			t.Errorf("%s: task_finished %v", skill, finished)
		}
		if gate["delegation_id"] != id || gate["skill"] != skill || gate["peer"] != "peer" || gate["remote_task_id"] == "" {
			t.Errorf("%s: gate_decided %v", skill, gate)
		}
		checks := fmt.Sprint(gate["checks"])
		switch skill {
		case "honest":
			if finished["state"] != "TASK_STATE_COMPLETED" || !strings.Contains(fmt.Sprint(finished["status"]), "Committed") {
				t.Errorf("honest: task_finished %v", finished)
			}
			if gate["outcome"] != "committed" || gate["reason"] != nil || !hasCheck(gate, "artifact notes__stats", true, "") ||
				!hasCheck(gate, "verifier same-count", true, "") || !allPassed(gate) {
				t.Errorf("honest: gate_decided %v, checks %s", gate, checks)
			}
		case "contradicted":
			if finished["state"] != "TASK_STATE_FAILED" || !strings.Contains(fmt.Sprint(finished["status"]), "Not committed") {
				t.Errorf("contradicted: task_finished %v", finished)
			}
			if gate["outcome"] != "rejected" || !hasCheck(gate, "verifier same-count", false, "is false") ||
				!hasCheck(gate, "artifact notes__stats", true, "") || !strings.Contains(fmt.Sprint(gate["reason"]), "verifier same-count: ") {
				t.Errorf("contradicted: gate_decided %v", gate)
			}
		}
	}
	posted.Lock()
	for _, ev := range posted.events {
		if ev["hook"] != "web-gate" || ev["point"] != "gate_decided" || (ev["delegation_id"] != ids["honest"] && ev["delegation_id"] != ids["contradicted"]) {
			t.Errorf("posted %v", ev)
		}
	}
	posted.Unlock()
	l := logs.String()
	for _, want := range []string{"hook=broken", "exited with status 1", "hook=slow", "timed out after 300ms", "hook=missing"} {
		if !strings.Contains(l, want) {
			t.Errorf("log does not say %q:\n%s", want, l)
		}
	}
}

// hasCheck reports whether a gate_decided event lists the check name with
// that result and a reason containing why.
func hasCheck(ev map[string]any, name string, passed bool, why string) bool {
	cs, _ := ev["checks"].([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["name"] == name {
			p, _ := m["passed"].(bool)
			return p == passed && strings.Contains(fmt.Sprint(m["reason"]), why)
		}
	}
	return false
}

// allPassed reports whether every check of a gate_decided event passed.
func allPassed(ev map[string]any) bool {
	cs, _ := ev["checks"].([]any)
	for _, c := range cs {
		if m, _ := c.(map[string]any); m["passed"] != true {
			return false
		}
	}
	return len(cs) > 0
}

// TestObservingHooksReload: a reload replaces the observing hooks: a task after it meets
// the new task_finished hook, one before it met none.
func TestObservingHooksReload(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	record := filepath.Join(dir, "record")
	if err := os.WriteFile(record, []byte("#!/bin/sh\nread -r line; printf '%s\\n' \"$line\" >> \""+seen+"\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := func(hooks string) *Config {
		t.Helper()
		c, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig+"limits: {shutdown_grace: 1s}\npolicy:\n  hooks: "+hooks+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = filepath.Join(dir, "data")
		return c
	}
	var logs syncBuffer
	a, url := serveTools(t, config("[]"), &logs)
	send := func(id string) string {
		t.Helper()
		_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":"hi"}]}}`, id))
		task := resultTask(t, out)
		if !strings.HasPrefix(state(task), "TASK_STATE_") {
			t.Fatalf("send: %v", out)
		}
		return task["id"].(string)
	}
	before := send("r1")
	if err := a.Reload(config(fmt.Sprintf("[{name: finished, point: task_finished, command: %q}]", record))); err != nil {
		t.Fatal(err)
	}
	after := send("r2")
	var lines []map[string]any
	for deadline := time.Now().Add(10 * time.Second); len(lines) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reloaded hook did not run")
		}
		lines = hookLines(t, seen)
	}
	time.Sleep(200 * time.Millisecond)
	lines = hookLines(t, seen)
	if len(lines) != 1 || lines[0]["task_id"] != after || lines[0]["task_id"] == before {
		t.Fatalf("hook runs %v, want one, for task %s", lines, after)
	}
	if l := logs.String(); strings.Contains(l, "need a restart") {
		t.Errorf("a hook change was reported as needing a restart:\n%s", l)
	}
}
