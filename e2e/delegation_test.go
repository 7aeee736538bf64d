package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/delegation"
)

// launchAgent starts `handoff serve` with the YAML config given, on addr and
// a data directory of its own, and returns without waiting: a test starts
// several agents, then waits for each with waitReady.
func launchAgent(t *testing.T, name, addr, config string) *agent {
	t.Helper()
	return launch(t, name, writeFile(t, name+".yaml", config), addr, t.TempDir())
}

// buildMCPServer builds examples/mcpserver, the MCP tool server every agent
// of the delegation test runs as its own process.
func buildMCPServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcpserver")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/handoff-a2a/handoff/examples/mcpserver").CombinedOutput()
	if err != nil {
		t.Fatalf("build examples/mcpserver: %v\n%s", err, out)
	}
	return bin
}

// startHTTPMCPServer runs the example MCP server on streamable HTTP, with
// args, and returns its endpoint once it accepts connections.
func startHTTPMCPServer(t *testing.T, bin string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	logs := &syncBuffer{}
	cmd := exec.Command(bin, append([]string{"--http", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the MCP server: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(exitTimeout):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the MCP server on %s did not exit after SIGINT", addr)
		}
	})
	deadline := time.Now().Add(readyTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return "http://" + addr + "/mcp"
		}
		select {
		case <-exited:
			t.Fatalf("the MCP server exited before it listened: %s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP server on %s never listened: %v", addr, err)
		}
	}
}

// writeNote adds a note through a real MCP client, so that server's stats
// differ from those of every other MCP server process.
func writeNote(t *testing.T, endpoint, name, text string) {
	t.Helper()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1.0.0"}, nil)
	s, err := client.Connect(callCtx(t), &mcpsdk.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect to the MCP server %s: %v", endpoint, err)
	}
	defer s.Close()
	res, err := s.CallTool(callCtx(t), &mcpsdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"name": name, "text": text}})
	if err != nil || res.IsError {
		t.Fatalf("write_note on %s: %v %+v", endpoint, err, res)
	}
}

// runHandoff runs the built CLI and returns its stdout; a non-zero exit
// fails the test.
func runHandoff(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(callCtx(t), handoffBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("handoff %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// skillMessage asks an agent for one of its skills by the metadata key the
// skill router reads.
func skillMessage(skill, text string) *a2a.Message {
	m := userMessage(uniqueID("delegate-"+skill), text)
	m.Metadata = map[string]any{"handoff/skill": skill}
	return m
}

// delegationWorld is the front agent, its peers and what the test needs to
// look at them.
type delegationWorld struct {
	front, honest, liar, contra, bystander *agent
	frontConfig                            string // the front's YAML file, for handoff peers
}

// startDelegationWorld runs, each as its own process with its own data
// directory and its own MCP server process:
//   - honest: counts notes with its MCP tool (one note, like the front's);
//   - liar: claims completed with no evidence (the conformance echo);
//   - contra: counts honestly, but its MCP server holds one note more than
//     the front's, so the front's verifier disagrees with its evidence;
//   - bystander: a peer the front must never reach, since its card comes
//     signed by a key outside the trust rule, or tampered through a proxy;
//   - front: one delegate skill per peer, each with its own contract.
func startDelegationWorld(t *testing.T) *delegationWorld {
	t.Helper()
	bin := buildMCPServer(t)
	common := fmt.Sprintf(`auth: {anonymous: true}
log: {level: warn}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
`, bin)
	contraMCP := startHTTPMCPServer(t, bin)
	writeNote(t, contraMCP, "extra", "One note the front agent's own MCP server does not have.")

	addr := map[string]string{}
	for _, n := range []string{"honest", "liar", "contra", "bystander", "front"} {
		addr[n] = freeAddr(t)
	}
	w := &delegationWorld{}
	w.honest = launchAgent(t, "honest", addr["honest"], "name: Honest counter\ndescription: Counts notes with its MCP tool.\n"+common+
		"skills: [{id: notes-stats, name: Note stats, tags: [honest], executor: mcp, tool: notes__stats}]\n")
	w.liar = launchAgent(t, "liar", addr["liar"], "name: Lying counter\ndescription: Says it counted, shows nothing.\n"+common+
		"skills: [{id: notes-stats, name: Note stats, tags: [liar], executor: tck}]\n")
	w.contra = launchAgent(t, "contra", addr["contra"], "name: Other counter\ndescription: Counts the notes of another store.\n"+
		strings.Replace(common, fmt.Sprintf("{name: notes, command: %q}", bin), fmt.Sprintf("{name: notes, transport: http, url: %q}", contraMCP), 1)+
		"skills: [{id: notes-stats, name: Note stats, tags: [contra], executor: mcp, tool: notes__stats}]\n")
	w.bystander = launchAgent(t, "bystander", addr["bystander"], "name: Bystander\ndescription: Must never be delegated to.\n"+common+
		"delegation: {max_hops: 2}\n"+
		"skills: [{id: notes-stats, name: Note stats, tags: [target], executor: tck}]\n")
	for _, a := range []*agent{w.honest, w.liar, w.contra, w.bystander} {
		a.waitReady()
	}

	// A card signed by a key the front does not trust: the front pins the
	// honest peer's JWKS for a peer that is really the bystander. A policy
	// of pinned keys trusts no jku, so the refusal names the signature's jku.
	dir := t.TempDir()
	_, jwks, err := httpGet(t.Context(), w.honest.base+"/.well-known/jwks.json")
	if err != nil {
		t.Fatalf("fetch the honest peer's JWKS: %v", err)
	}
	pinned := filepath.Join(dir, "honest-jwks.json")
	if err := os.WriteFile(pinned, []byte(jwks), 0o600); err != nil {
		t.Fatal(err)
	}
	// A card altered after signing: a proxy serves the bystander's card
	// with one byte of its description changed.
	_, card, err := httpGet(t.Context(), w.bystander.base+"/.well-known/agent-card.json")
	if err != nil {
		t.Fatalf("fetch the bystander's card: %v", err)
	}
	proxy := serveFixed(t, map[string][]byte{"/.well-known/agent-card.json": changeOneByte(t, []byte(card), "description")})

	contract := func(skill string) string {
		path := filepath.Join(dir, skill+".yaml")
		body := fmt.Sprintf(`skill: %s
version: "e2e-1"
artifacts:
  notes__stats:
    type: object
    required: [notes, bytes]
commit_requires:
  - {artifact: notes__stats, pointer: /notes}
verifiers:
  - name: same-count
    tool: notes__stats
    arguments: {}
    condition: result.notes == evidence.notes__stats.notes
`, skill)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	jku := func(a *agent) string { return a.base + "/.well-known/" }
	front := "name: Front\ndescription: Delegates note counts and commits only verified answers.\n" + common + fmt.Sprintf(`peers:
  - {name: honest, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: liar, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: contra, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: untrusted, url: %q, trust: {jwks_file: %q}}
  - {name: tampered, url: %q, trust: {jku_prefixes: [%q]}}
skills:
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, tags: [honest], contract: %q}}
  - {id: liar, name: L, executor: delegate, delegate: {skill: notes-stats, tags: [liar], contract: %q, reverify: 2}}
  - {id: contra, name: C, executor: delegate, delegate: {skill: notes-stats, tags: [contra], contract: %q}}
  - {id: bystander, name: B, executor: delegate, delegate: {skill: notes-stats, tags: [target], contract: %q}}
`, w.honest.base, jku(w.honest), w.liar.base, jku(w.liar), w.contra.base, jku(w.contra),
		w.bystander.base, pinned, proxy.URL, jku(w.bystander),
		contract("honest"), contract("liar"), contract("contra"), contract("bystander"))
	w.frontConfig = filepath.Join(dir, "front.yaml")
	if err := os.WriteFile(w.frontConfig, []byte(front), 0o600); err != nil {
		t.Fatal(err)
	}
	w.front = launchAgent(t, "front", addr["front"], front)
	w.front.waitReady()
	return w
}

// TestDelegationAcrossProcesses runs a front agent and four peers as
// separate handoff processes, each with its own MCP server process, and
// checks each outcome of the acceptance gate, the peer directory's
// refusals and the receiver's envelope checks from the outside: task
// states and messages over A2A, `handoff peers`, `handoff ledger`.
func TestDelegationAcrossProcesses(t *testing.T) {
	w := startDelegationWorld(t)
	front := jsonrpcClient(t, w.front)
	var committed *a2a.Task

	t.Run("honest peer: committed", func(t *testing.T) {
		task := sendTask(t, front, &a2a.SendMessageRequest{Message: skillMessage("honest", "count the notes")})
		wantState(t, "honest delegation", task, a2a.TaskStateCompleted)
		if msg := statusText(task.Status); !strings.HasPrefix(msg, "Committed: peer honest's completion passed the contract") ||
			!strings.Contains(msg, "same-count ok") {
			t.Fatalf("status message = %q, want the commit with the verifier's check", msg)
		}
		if len(task.Artifacts) != 1 || task.Artifacts[0].Name != "notes__stats" {
			t.Fatalf("artifacts = %s, want the peer's notes__stats evidence", asJSON(t, task.Artifacts))
		}
		if got := asJSON(t, task.Artifacts[0].Parts); !strings.Contains(got, `"notes":`) {
			t.Fatalf("evidence = %s, want the count the peer made with its MCP tool", got)
		}
		peerTasks := listTasks(t, w.honest)
		if len(peerTasks) != 1 || peerTasks[0].Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the honest peer's tasks = %s, want the one delegated task, completed", asJSON(t, peerTasks))
		}
		committed = task
	})

	t.Run("lying peer: unknown, re-checked, settled", func(t *testing.T) {
		req := &a2a.SendMessageRequest{Message: skillMessage("liar", "count the notes")}
		evs, err := collect(front.SendStreamingMessage(callCtx(t), req))
		if err != nil {
			t.Fatalf("stream the lying delegation: %v after %v", err, eventsJSON(t, evs))
		}
		var rechecks []string
		for _, ev := range evs {
			if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && strings.HasPrefix(statusText(u.Status), "Acceptance unknown") {
				rechecks = append(rechecks, statusText(u.Status))
			}
		}
		// reverify: 2, backoff 1s then 2s.
		want := []string{"checking again in 1s.", "checking again in 2s."}
		if len(rechecks) != len(want) {
			t.Fatalf("re-checks = %q, want %d (delegate.reverify); events: %v", rechecks, len(want), eventsJSON(t, evs))
		}
		for i, r := range rechecks {
			if !strings.Contains(r, "notes__stats") || !strings.HasSuffix(r, want[i]) {
				t.Fatalf("re-check %d = %q, want the missing evidence and %q", i, r, want[i])
			}
		}
		last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
		if !ok || last.Status.State != a2a.TaskStateFailed {
			t.Fatalf("last event = %s, want the task failed", asJSON(t, evs[len(evs)-1]))
		}
		msg := statusText(last.Status)
		if !strings.HasPrefix(msg, "Not committed: unknown (peer liar, task ") || !strings.Contains(msg, "notes__stats") {
			t.Fatalf("final status message = %q, want the unknown outcome with the gate's reason (missing evidence)", msg)
		}
		stored := getTask(t, front, last.TaskID)
		wantState(t, "the lying delegation, stored", stored, a2a.TaskStateFailed)
		if len(stored.Artifacts) != 0 {
			t.Fatalf("a settled unknown kept artifacts: %s", asJSON(t, stored.Artifacts))
		}
		peerTasks := listTasks(t, w.liar)
		if len(peerTasks) != 1 || peerTasks[0].Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the liar's tasks = %s, want one, claimed completed", asJSON(t, peerTasks))
		}
	})

	t.Run("contradicting peer: rejected", func(t *testing.T) {
		task := sendTask(t, front, &a2a.SendMessageRequest{Message: skillMessage("contra", "count the notes")})
		wantState(t, "contradicted delegation", task, a2a.TaskStateFailed)
		msg := statusText(task.Status)
		if !strings.HasPrefix(msg, "Not committed: rejected (peer contra, task ") || !strings.Contains(msg, "same-count failed") {
			t.Fatalf("status message = %q, want rejected by the same-count verifier", msg)
		}
		if len(task.Artifacts) != 0 {
			t.Fatalf("a rejected delegation kept artifacts: %s", asJSON(t, task.Artifacts))
		}
		if peerTasks := listTasks(t, w.contra); len(peerTasks) != 1 || peerTasks[0].Status.State != a2a.TaskStateCompleted {
			t.Fatalf("the contradicting peer's tasks = %s, want one, completed with its own count", asJSON(t, peerTasks))
		}
	})

	t.Run("unverified or tampered card: no delegation", func(t *testing.T) {
		task := sendTask(t, front, &a2a.SendMessageRequest{Message: skillMessage("bystander", "count the notes")})
		wantState(t, "delegation to an unverified peer", task, a2a.TaskStateFailed)
		wantStatusMessage(t, "delegation to an unverified peer", task.Status, "No verified peer offers skill notes-stats; see handoff peers.")

		var rows []struct {
			Name, State, Reason string
			Skills              []string
		}
		if err := json.Unmarshal(jsonArray(runHandoff(t, "peers", "--config", w.frontConfig, "--json")), &rows); err != nil {
			t.Fatalf("handoff peers --json: %v", err)
		}
		want := map[string]struct{ state, reason string }{
			"honest":    {"verified", ""},
			"liar":      {"verified", ""},
			"contra":    {"verified", ""},
			"untrusted": {"refused", "jku not trusted"},
			"tampered":  {"refused", "signature does not match card"},
		}
		if len(rows) != len(want) {
			t.Fatalf("handoff peers listed %d peers, want %d: %+v", len(rows), len(want), rows)
		}
		for _, r := range rows {
			p, ok := want[r.Name]
			if !ok || r.State != p.state || (p.reason == "") != (r.Reason == "") || !strings.Contains(r.Reason, p.reason) {
				t.Errorf("peer %s: %s %q, want %s with a reason containing %q", r.Name, r.State, r.Reason, p.state, p.reason)
			}
			if r.State == "refused" && len(r.Skills) != 0 {
				t.Errorf("refused peer %s offers skills %v", r.Name, r.Skills)
			}
		}
		// The control: the same card, fetched directly under a trust rule
		// that names its jku, verifies; only the key or the changed byte
		// made the difference above.
		control := filepath.Join(t.TempDir(), "control.yaml")
		if err := os.WriteFile(control, fmt.Appendf(nil, "name: Control\ndescription: c\nauth: {anonymous: true}\n"+
			"skills: [{id: echo, name: Echo, executor: tck}]\npeers: [{name: direct, url: %q, trust: {jku_prefixes: [%q]}}]\n",
			w.bystander.base, w.bystander.base+"/.well-known/"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out := runHandoff(t, "peers", "--config", control, "--json"); !strings.Contains(out, `"state":"verified"`) {
			t.Fatalf("the bystander's own card, fetched directly: %s, want verified", out)
		}
	})

	t.Run("hop limit and cycle: refused by the receiver", func(t *testing.T) {
		c := jsonrpcClient(t, w.bystander)
		ctx := a2aclient.AttachServiceParams(callCtx(t), a2aclient.ServiceParams{a2a.SvcParamExtensions: {delegation.EnvelopeExtension}})
		deadline, card := time.Now().Add(time.Minute), cardDigestAt(t, w.bystander.base)
		for _, tc := range []struct {
			name           string
			env            delegation.Envelope
			prefix, suffix string
		}{
			{"over max_hops", delegation.Envelope{Actor: "e2e", Hops: 3, Deadline: deadline, Provenance: []delegation.Hop{{Agent: "A"}, {Agent: "B"}, {Agent: "C"}}},
				"delegation refused: delegation hop limit exceeded: 3 hops, at most 2", ""},
			{"cycle", delegation.Envelope{Actor: "e2e", Hops: 2, Deadline: deadline, Provenance: []delegation.Hop{{Agent: "Renamed", CardDigest: card}, {Agent: "Front"}}},
				`delegation refused: delegation cycle: agent "Renamed" (card ` + card + ")", "already at hop 0"},
			{"no deadline", delegation.Envelope{Actor: "e2e", Hops: 1, Provenance: []delegation.Hop{{Agent: "Front"}}},
				"delegation envelope: malformed delegation envelope: no deadline", ""},
		} {
			m := userMessage(uniqueID("envelope"), "count the notes")
			tc.env.Attach(m)
			_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m})
			var ae *a2a.Error
			// a2a-go's JSON-RPC client turns code -32602 into ErrInvalidParams
			// and keeps the agent's message.
			if !errors.Is(err, a2a.ErrInvalidParams) || !errors.As(err, &ae) ||
				!strings.HasPrefix(ae.Message, tc.prefix) || !strings.HasSuffix(ae.Message, tc.suffix) {
				t.Errorf("%s: SendMessage error = %v, want JSON-RPC -32602 (invalid params) %q…%q", tc.name, err, tc.prefix, tc.suffix)
			}
		}
	})

	t.Run("the bystander executed nothing", func(t *testing.T) {
		if got := listTasks(t, w.bystander); len(got) != 0 {
			t.Fatalf("the bystander has tasks %s, want none: no delegation reached it and every envelope was refused", asJSON(t, got))
		}
		// The control: an envelope within the limits is served.
		m := userMessage(uniqueID("envelope"), "count the notes")
		(&delegation.Envelope{Actor: "e2e", Hops: 2, Deadline: time.Now().Add(time.Minute), Provenance: []delegation.Hop{{Agent: "Bystander"}, {Agent: "Front"}}}).Attach(m)
		task := sendTask(t, jsonrpcClient(t, w.bystander), &a2a.SendMessageRequest{Message: m})
		wantState(t, "an envelope within the limits", task, a2a.TaskStateCompleted)
	})

	t.Run("ledger: exactly the committed delegation", func(t *testing.T) {
		if committed == nil {
			t.Fatal("the honest delegation did not commit; nothing to look for")
		}
		if code := w.front.stop(os.Interrupt); code != 0 {
			t.Fatalf("front exited with code %d after SIGINT, want 0%s", code, w.front.exitReason(code))
		}
		var entries []acceptance.Entry
		if err := json.Unmarshal(jsonArray(runHandoff(t, "ledger", "--data-dir", w.front.dataDir, "--json")), &entries); err != nil {
			t.Fatalf("handoff ledger --json: %v", err)
		}
		if len(entries) != 1 {
			t.Fatalf("ledger holds %d entries, want 1 (the honest delegation): %+v", len(entries), entries)
		}
		e := entries[0]
		if e.DelegationID != string(committed.ID) || e.Skill != "honest" || e.ContractVersion != "e2e-1" ||
			len(e.EvidenceDigests) != 1 || e.EvidenceDigests["notes__stats"] == "" || len(e.Verifiers) != 1 || !e.Verifiers[0].Passed {
			t.Fatalf("ledger entry = %+v, want delegation %s, skill honest, contract e2e-1, the notes__stats digest and the passed verifier", e, committed.ID)
		}
	})
}

// listTasks lists every task of the anonymous caller on a.
func listTasks(t *testing.T, a *agent) []*a2a.Task {
	t.Helper()
	res, err := jsonrpcClient(t, a).ListTasks(callCtx(t), &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatalf("ListTasks on %s: %v", a.base, err)
	}
	return res.Tasks
}
