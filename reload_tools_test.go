package handoff

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log sink that Serve's goroutines and the test may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveTools serves an agent for the config, logging to logs, and returns
// it with its URL.
func serveTools(t *testing.T, c *Config, logs *syncBuffer) (*Agent, string) {
	t.Helper()
	return serveAgent(t, c, WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
}

// TestReloadTools: Reload applies new contracts and servers to the next
// task, refuses a set the pipeline rejects (the old one stays in force),
// and names the changes it cannot apply without a restart.
func TestReloadTools(t *testing.T) {
	bin := buildMCPServer(t)
	dataDir := t.TempDir()
	config := func(name, servers, readContract string) *Config {
		t.Helper()
		c, err := ParseConfig("tools.yaml", strings.NewReader(fmt.Sprintf(`name: %s
description: notes
log: {level: error}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: %s
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, %s}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
`, name, servers, readContract)))
		if err != nil {
			t.Fatal(err)
		}
		c.DataDir = dataDir
		return c
	}
	notes := fmt.Sprintf("[{name: notes, command: %q}]", bin)
	var logs syncBuffer
	a, url := serveTools(t, config("Tools", notes, "approval: none"), &logs)
	n := 0
	read := func() (string, string) {
		t.Helper()
		n++
		_, out := call(t, url, "", "", "SendMessage",
			fmt.Sprintf(`{"message":{"messageId":"r%d","role":"ROLE_USER","parts":[{"text":"welcome"}]}}`, n))
		task := resultTask(t, out)
		text := fmt.Sprint(task["status"])
		return state(task), text
	}
	if st, why := read(); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("read before any reload: %s %s", st, why)
	}

	// A contract that now wants an approval applies to the next task.
	if err := a.Reload(config("Tools", notes, "approval: mandatory")); err != nil {
		t.Fatal(err)
	}
	if st, why := read(); st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("read after the contract was made mandatory: %s %s", st, why)
	}

	// An output schema the pipeline cannot compile: refused, nothing changes.
	bad := config("Tools", "[]", "approval: none, output_schema: {type: 7}")
	if err := a.Reload(bad); err == nil || !strings.Contains(err.Error(), "output schema") {
		t.Fatalf("Reload of a bad contract: %v", err)
	}
	if st, why := read(); st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("a refused reload changed the contract or removed the server: %s %s", st, why)
	}

	// Without the server its tool is unavailable; other keys need a restart.
	if err := a.Reload(config("Renamed", "[]", "approval: none")); err != nil {
		t.Fatal(err)
	}
	if st, why := read(); st != "TASK_STATE_FAILED" || !strings.Contains(why, "unavailable_tool") {
		t.Fatalf("read after its server was removed: %s %s", st, why)
	}
	if l := logs.String(); !strings.Contains(l, "need a restart") || !strings.Contains(l, "keys=name") {
		t.Fatalf("the name change was not reported as needing a restart:\n%s", l)
	}

	// The server comes back under the same name.
	if err := a.Reload(config("Tools", notes, "approval: none")); err != nil {
		t.Fatal(err)
	}
	if st, why := read(); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("read after the server was added back: %s %s", st, why)
	}
}
