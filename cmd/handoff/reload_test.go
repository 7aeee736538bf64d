package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeReloadsOnSIGHUP runs `handoff serve` as a real process and
// reloads its config with SIGHUP: a changed contract applies to the next
// task, a config that does not parse is refused with its reason and the
// old one stays in force, and a change outside the MCP part is reported as
// needing a restart. SIGINT then stops it with exit code 0.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	handoffBin, mcpBin := filepath.Join(dir, "handoff"), filepath.Join(dir, "mcpserver")
	for bin, pkg := range map[string]string{handoffBin: ".", mcpBin: "../../examples/mcpserver"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	cfgPath := filepath.Join(dir, "agent.yaml")
	writeConfig := func(name, approval string) {
		t.Helper()
		yaml := fmt.Sprintf(`name: %s
description: notes
listen: 127.0.0.1:0
log: {level: info}
limits: {shutdown_grace: 1s}
auth: {anonymous: true}
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__read_note, effect: read, risk: low, approval: %s}
skills:
  - {id: read-note, name: Read, executor: mcp, tool: notes__read_note}
`, name, mcpBin, approval)
		if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("Tools", "none")

	cmd := exec.Command(handoffBin, "serve", "--config", cfgPath, "--data-dir", filepath.Join(dir, "data"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 256)
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
		exited <- cmd.Wait() // after stderr is drained, as Wait requires
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range lines { // let Wait run
		}
	})
	var seen []string
	waitLog := func(want string) string {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("handoff exited before logging %q:\n%s", want, strings.Join(seen, "\n"))
				}
				seen = append(seen, l)
				if strings.Contains(l, want) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %q in the log:\n%s", want, strings.Join(seen, "\n"))
			}
		}
	}
	addr := regexp.MustCompile(`address=(\S+)`).FindStringSubmatch(waitLog("agent serving"))
	if addr == nil {
		t.Fatalf("no address in the serving line:\n%s", strings.Join(seen, "\n"))
	}
	url := "http://" + addr[1]
	n := 0
	read := func() string {
		t.Helper()
		n++
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"r%d","role":"ROLE_USER","parts":[{"text":"welcome"}]}}}`, n)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", url+"/a2a/jsonrpc", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result struct {
				Task struct {
					Status struct {
						State string `json:"state"`
					} `json:"status"`
				} `json:"task"`
			} `json:"result"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Result.Task.Status.State
	}
	hup := func() {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	if st := read(); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("read before the reload: %s", st)
	}
	writeConfig("Tools", "mandatory")
	hup()
	waitLog("config reloaded")
	if st := read(); st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("read after the contract was made mandatory: %s", st)
	}

	if err := os.WriteFile(cfgPath, []byte("name: Tools\nmcp_servers: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup()
	if l := waitLog("config reload refused"); !strings.Contains(l, "agent.yaml") {
		t.Fatalf("the refusal does not say what was wrong: %s", l)
	}
	if st := read(); st != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("read after a refused reload: %s", st)
	}

	writeConfig("Renamed", "none")
	hup()
	if l := waitLog("need a restart"); !strings.Contains(l, "keys=name") {
		t.Fatalf("restart warning does not name the key: %s", l)
	}
	waitLog("config reloaded")
	if st := read(); st != "TASK_STATE_COMPLETED" {
		t.Fatalf("read after the contract was relaxed again: %s", st)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := <-exited; err != nil {
		t.Fatalf("handoff serve after SIGINT: %v, want exit code 0", err)
	}
}
