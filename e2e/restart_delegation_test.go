package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/delegation"
)

// serveConfig runs `handoff serve` with the config file on addr and the
// data directory given and waits until it is ready.
func serveConfig(t *testing.T, name, config, addr, dataDir string) *agent {
	t.Helper()
	a := launch(t, name, config, addr, dataDir)
	a.waitReady()
	return a
}

// writeFile writes body to a new file in a temp directory.
func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// eventually polls cond every 20ms until it holds, failing the test when
// d passes first.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("%s: not within %s", what, d)
		case <-tick.C:
		}
	}
}

// TestDelegationSurvivesKill9: the front agent is killed (kill -9) while
// its peer works on the delegated task; restarted on the same data
// directory, it follows the peer's task to the end, its gate decides once
// and commits, the ledger holds exactly one entry, and the peer saw one
// task and one tool call.
func TestDelegationSurvivesKill9(t *testing.T) {
	delegationSurvivesRestart(t, func(front *agent) { front.kill9() })
}

// TestDelegationSurvivesGracefulRestart: the same with SIGINT, whose
// shutdown grace ends before the peer's task: the front exits 0, leaves its
// task working and the peer's task running, and takes both up again.
func TestDelegationSurvivesGracefulRestart(t *testing.T) {
	delegationSurvivesRestart(t, func(front *agent) {
		if code := front.stop(os.Interrupt); code != 0 {
			t.Fatalf("front exited with code %d after SIGINT, want 0%s", code, front.exitReason(code))
		}
	})
}

// delegationSurvivesRestart stops the front agent with stop while its peer
// works on the delegated task, restarts it and checks the delegation ends
// committed, once.
func delegationSurvivesRestart(t *testing.T, stop func(front *agent)) {
	tool := filepath.Join(t.TempDir(), "slowtool")
	if out, err := exec.Command("go", "build", "-o", tool, "./testdata/slowtool").CombinedOutput(); err != nil {
		t.Fatalf("build the slow MCP tool: %v\n%s", err, out)
	}
	peerAddr := freeAddr(t)
	peer := serveConfig(t, "peer", writeFile(t, "peer.yaml", fmt.Sprintf(`name: Slow Peer
description: works until told to stop
auth: {anonymous: true}
log: {level: info}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: slow, command: %q}]
tool_contracts: [{tool: slow__work, effect: read, risk: low, approval: none, timeout: 1m}]
skills: [{id: work, name: Work, executor: mcp, tool: slow__work}]
`, tool)), peerAddr, t.TempDir())

	contract := writeFile(t, "contract.yaml", `skill: slow-work
version: "1"
artifacts:
  slow__work:
    type: object
    required: [receipt]
commit_requires:
  - {artifact: slow__work, pointer: /receipt}
`)
	frontConfig := writeFile(t, "front.yaml", fmt.Sprintf(`name: Front
description: delegates slow work
auth: {anonymous: true}
log: {level: info}
limits: {shutdown_grace: 1s}
peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: slow-work, name: Slow work, executor: delegate, delegate: {skill: work, contract: %q, timeout: 2m}}
`, peer.base, peer.base+"/.well-known/", contract))
	frontDir := t.TempDir()
	front := serveConfig(t, "front", frontConfig, freeAddr(t), frontDir)

	work := t.TempDir()
	until, calls := filepath.Join(work, "done"), filepath.Join(work, "calls")
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"until_file": until, "calls_file": calls}))
	msg.Metadata = map[string]any{"handoff/skill": "slow-work"}
	res, err := jsonrpcClient(t, front).SendMessage(callCtx(t), &a2a.SendMessageRequest{Message: msg,
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("send to the front agent: %v", err)
	}
	local := res.(*a2a.Task).ID

	// The front has recorded the peer's task, and the peer's tool is working.
	fc := jsonrpcClient(t, front)
	var rec *delegation.Record
	eventually(t, 20*time.Second, "the delegation record names the peer's task", func() bool {
		task, err := fc.GetTask(callCtx(t), &a2a.GetTaskRequest{ID: local})
		if err != nil {
			t.Fatalf("get the front's task: %v", err)
		}
		rec, _, err = delegation.RecordFrom(task.Metadata)
		if err != nil {
			t.Fatalf("record: %v", err)
		}
		return rec != nil && rec.RemoteTaskID != ""
	})
	eventually(t, 20*time.Second, "the peer's tool is called", func() bool { _, err := os.Stat(calls); return err == nil })

	stop(front)

	pc := jsonrpcClient(t, peer)
	if task, err := pc.GetTask(callCtx(t), &a2a.GetTaskRequest{ID: a2a.TaskID(rec.RemoteTaskID)}); err != nil || task.Status.State.Terminal() {
		t.Fatalf("the peer's task after the front died: %v %v", task, err)
	}

	front = serveConfig(t, "front (restarted)", frontConfig, freeAddr(t), frontDir)
	if err := os.WriteFile(until, nil, 0o600); err != nil { // the peer's work may end now
		t.Fatal(err)
	}
	fc = jsonrpcClient(t, front)
	var final *a2a.Task
	eventually(t, 30*time.Second, "the front's task ends", func() bool {
		final, err = fc.GetTask(callCtx(t), &a2a.GetTaskRequest{ID: local})
		if err != nil {
			t.Fatalf("get the front's task after the restart: %v", err)
		}
		return final.Status.State.Terminal()
	})
	if final.Status.State != a2a.TaskStateCompleted || !strings.Contains(statusText(final.Status), "Committed") {
		t.Fatalf("front's task after the restart: %s %q", final.Status.State, statusText(final.Status))
	}
	if len(final.Artifacts) != 1 || final.Artifacts[0].Name != "slow__work" {
		t.Fatalf("committed without the peer's artifact: %v", final.Artifacts)
	}
	resumed, committed := 0, 0
	for _, m := range append(final.History, final.Status.Message) {
		if m == nil || len(m.Parts) == 0 {
			continue
		}
		resumed += strings.Count(m.Parts[0].Text(), "The agent restarted; following the delegation")
		committed += strings.Count(m.Parts[0].Text(), "Committed")
	}
	if resumed != 1 || committed != 1 {
		t.Fatalf("history: %d resumes and %d commits, want one each: %s", resumed, committed, asJSON(t, final.History))
	}
	rec, _, err = delegation.RecordFrom(final.Metadata)
	if err != nil || rec.Outcome != "committed" || rec.RemoteState != a2a.TaskStateCompleted {
		t.Fatalf("final delegation record: %+v %v", rec, err)
	}

	// The running front lists the delegation by URL.
	var listed []acceptance.Delegation
	if err := json.Unmarshal(jsonArray(handoffCLI(t, "delegations", front.base, "--json")), &listed); err != nil ||
		len(listed) != 1 || listed[0].TaskID != string(local) || listed[0].RemoteTaskID != rec.RemoteTaskID || listed[0].Outcome != "committed" {
		t.Fatalf("handoff delegations: %+v %v", listed, err)
	}

	// The peer saw one task and one tool call: the restart did not send again.
	list, err := pc.ListTasks(callCtx(t), &a2a.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 1 || string(list.Tasks[0].ID) != rec.RemoteTaskID {
		t.Fatalf("the peer's tasks: %v %v", list, err)
	}
	if b, err := os.ReadFile(calls); err != nil || strings.Count(string(b), "call") != 1 {
		t.Fatalf("the peer's tool calls: %q %v", b, err)
	}

	// The gate committed once: the ledger holds exactly this delegation.
	if code := front.stop(os.Interrupt); code != 0 {
		t.Fatalf("front exited with %d", code)
	}
	l, err := acceptance.OpenBoltLedger(filepath.Join(frontDir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	entries, err := l.List(t.Context(), 0)
	if err != nil || len(entries) != 1 || entries[0].DelegationID != string(local) || entries[0].Skill != "slow-work" {
		t.Fatalf("ledger: %+v %v", entries, err)
	}
	// The evidence digest names the peer's artifact as the front stored it.
	store, err := artifacts.NewStore(filepath.Join(frontDir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := store.Get(t.Context(), entries[0].EvidenceDigests["slow__work"])
	if err != nil {
		t.Fatalf("the evidence's artifact in the front's store: %v", err)
	}
	if d, _ := artifacts.Digest(final.Artifacts[0]); d != entries[0].EvidenceDigests["slow__work"] || len(kept.Parts) != len(final.Artifacts[0].Parts) {
		t.Fatalf("stored artifact %s has %d parts; the task's artifact digests %s", entries[0].EvidenceDigests["slow__work"], len(kept.Parts), d)
	}
}

// handoffCLI runs the handoff binary and returns its standard output.
func handoffCLI(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, handoffBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("handoff %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}
