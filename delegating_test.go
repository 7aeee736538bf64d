package handoff

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
)

// writeContract writes an acceptance contract for skill with condition.
func writeContract(t *testing.T, dir, skill, require, condition string) string {
	t.Helper()
	path := filepath.Join(dir, skill+".yaml")
	body := fmt.Sprintf(`skill: %s
version: "1"
artifacts:
  notes__stats:
    type: object
    required: [notes, bytes]
commit_requires:
  - {artifact: notes__stats, pointer: %s}
verifiers:
  - name: same-count
    tool: notes__stats
    arguments: {}
    condition: %q
`, skill, require, condition)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startNotesPeer starts the peer the delegation tests delegate to: an agent
// whose skill is the example MCP server's notes__stats tool. common is the
// config both it and its callers share (anonymous, the MCP server, its
// contract).
func startNotesPeer(t *testing.T) (common, peerURL string) {
	t.Helper()
	common = fmt.Sprintf(`auth: {anonymous: true}
log: {level: error}
limits: {shutdown_grace: 1s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
`, buildMCPServer(t))
	return common, startFromYAML(t, "peer.yaml", "name: Peer\ndescription: counts notes\n"+common+
		"skills: [{id: notes-stats, name: Stats, executor: mcp, tool: notes__stats}]\n")
}

func startFromYAML(t *testing.T, name, yaml string) string {
	t.Helper()
	c, err := ParseConfig(name, strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)
	dataDirs.Store(url, c.DataDir)
	return url
}

// dataDirs maps an agent's URL to its data directory, for tests that read
// its files once it stopped.
var dataDirs sync.Map

func frontDir(t *testing.T, url string) string {
	d, ok := dataDirs.Load(url)
	if !ok {
		t.Fatalf("no data directory for %s", url)
	}
	return d.(string)
}

// TestDelegationThroughTheGate: a front agent delegates to a verified peer
// and commits only what its acceptance gate accepts: an honest completion
// commits; one its own verifier contradicts is rejected; one without the
// evidence its contract requires stays unknown.
func TestDelegationThroughTheGate(t *testing.T) {
	common, peer := startNotesPeer(t)
	dir := t.TempDir()
	front := startFromYAML(t, "front.yaml", "name: Front\ndescription: delegates\n"+common+fmt.Sprintf(`peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
  - {id: contradicted, name: C, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
  - {id: no-evidence, name: N, executor: delegate, delegate: {skill: notes-stats, contract: %q, reverify: 1}}
`, peer, peer+"/.well-known/",
		writeContract(t, dir, "honest", "/notes", "result.notes == evidence.notes__stats.notes"),
		writeContract(t, dir, "contradicted", "/notes", "result.notes == evidence.notes__stats.notes + 1.0"),
		writeContract(t, dir, "no-evidence", "/receipt", "true")))

	for _, tc := range []struct {
		skill, state string
		texts        []string
	}{
		{"honest", "TASK_STATE_COMPLETED", []string{"Committed"}},
		// The refusal names the false term and the values it read.
		{"contradicted", "TASK_STATE_FAILED", []string{"rejected",
			"result.notes == evidence.notes__stats.notes + 1.0 is false (result.notes = ", ", evidence.notes__stats.notes = "}},
		{"no-evidence", "TASK_STATE_FAILED", []string{"unknown"}},
	} {
		t.Run(tc.skill, func(t *testing.T) {
			_, out := call(t, front, "", "", "SendMessage", fmt.Sprintf(
				`{"message":{"messageId":"m-%s","role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"data":{}}]}}`, tc.skill, tc.skill))
			task := resultTask(t, out)
			b := fmt.Sprint(task["status"])
			for _, text := range tc.texts {
				if state(task) != tc.state || !strings.Contains(b, text) {
					t.Fatalf("%s: %s %s, want %s with %q", tc.skill, state(task), b, tc.state, text)
				}
			}
			if tc.state == "TASK_STATE_COMPLETED" && task["artifacts"] == nil {
				t.Fatalf("committed without the peer's artifact: %v", task)
			}
			// unknown is checked again (reverify: 1) before it settles.
			if rechecked := strings.Contains(fmt.Sprint(task["history"]), "checking again"); rechecked != (tc.skill == "no-evidence") {
				t.Fatalf("%s: re-verification in history = %v: %v", tc.skill, rechecked, task["history"])
			}
		})
	}

	// Only the honest completion reached the ledger.
	stopAgent(t, front)
	l, err := acceptance.OpenBoltLedger(filepath.Join(frontDir(t, front), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	entries, err := l.List(t.Context(), 0)
	if err != nil || len(entries) != 1 || entries[0].Skill != "honest" {
		t.Fatalf("ledger: %v %v", entries, err)
	}

	// The peer refuses an envelope whose provenance already holds its card
	// (a cycle), under whatever name; its name on another card is no cycle.
	deadline := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	for _, tc := range []struct{ name, hop, want string }{
		{"its card under another name", fmt.Sprintf(`{"agent":"Renamed","cardDigest":%q}`, cardDigestOf(t, peer)), "cycle"},
		{"its name on another card", `{"agent":"Peer","cardDigest":"sha256:` + strings.Repeat("0", 64) + `"}`, ""},
	} {
		_, out := call(t, peer, "", "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"cyc-%d","role":"ROLE_USER","parts":[{"data":{}}],
		"metadata":{"https://github.com/handoff-a2a/handoff/ext/delegation/v1":{"actor":"x","hops":1,"deadline":%q,"provenance":[%s]}}}}`, len(tc.name), deadline, tc.hop))
		if refused := errorCode(out) == -32602 && strings.Contains(fmt.Sprint(out), "delegation cycle"); refused != (tc.want != "") {
			t.Fatalf("%s: refused as a cycle %v, want %v: %v", tc.name, refused, tc.want != "", out)
		}
	}
}

// cardDigestOf fetches the agent's card and returns its delegation.CardDigest.
func cardDigestOf(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	card, err := agentcard.ParseCard(b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := delegation.CardDigest(card)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
