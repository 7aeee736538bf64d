package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
)

// A delegation to a peer built on the official JS SDK 1.x server:
// js/payments-peer.mjs, run with node, serves a refund skill through the
// SDK's DefaultRequestHandler and express handlers, with a card the SDK
// signs. Its bank settles an order when the test writes the order's file
// in the release directory, and records each settled refund as one line
// of its bank file.

const jsPeerScript = "payments-peer.mjs"

// requireJSPeer makes sure node runs the SDK (its pinned version) and
// express: npm ci installs both from the committed lock when one lacks.
func requireJSPeer(t *testing.T) {
	t.Helper()
	requireJSVerifier(t)
	requireNPM(t, jsDir, "express")
}

// jsPeer is one running payments-peer.mjs.
type jsPeer struct {
	base    string // its URL
	kid     string // the key its card is signed with
	jwks    string // the file holding that key's public JWKS, for the front's trust rule
	bank    string // its bank's record: one JSON line per settled refund
	release string // the directory where an order's file settles it
	out     *syncBuffer
}

// startJSPeer generates the peer's signing key (its operator would hand
// the public half to ours out of band, as a JWKS file), starts the peer
// and waits until it serves its card. Cleanup stops it with SIGTERM.
func startJSPeer(t *testing.T) *jsPeer {
	t.Helper()
	requireJSPeer(t)
	dir := t.TempDir()
	p := &jsPeer{kid: "js-payments-1", jwks: filepath.Join(dir, "jwks.json"), bank: filepath.Join(dir, "bank.jsonl"),
		release: filepath.Join(dir, "release"), out: &syncBuffer{}}
	if err := os.Mkdir(p.release, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := agentcard.GenerateKey(jose.EdDSA, p.kid)
	if err != nil {
		t.Fatal(err)
	}
	private, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	public, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "key.json")
	if err := os.WriteFile(keyFile, private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.jwks, public, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p.base = "http://" + addr
	cmd := exec.Command("node", filepath.Join(jsDir, jsPeerScript), "--listen", addr, "--key", keyFile, "--bank", p.bank, "--release", p.release)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the JS peer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("JS peer (%s) log:\n%s", addr, p.out.String())
		}
	})
	eventually(t, 20*time.Second, "the JS peer serves its card", func() bool {
		select {
		case <-exited:
			t.Fatalf("the JS peer exited: %s", p.out.String())
		default:
		}
		code, _, err := httpGet(callCtx(t), p.base+"/.well-known/agent-card.json")
		return err == nil && code == 200
	})
	return p
}

// settle lets the peer's bank settle order.
func (p *jsPeer) settle(t *testing.T, order string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.release, order), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// refunds returns the bank's record of settled refunds for order.
func (p *jsPeer) refunds(t *testing.T, order string) []map[string]any {
	t.Helper()
	f, err := os.Open(p.bank)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bank record %q: %v", sc.Text(), err)
		}
		if r["order"] == order {
			out = append(out, r)
		}
	}
	return out
}

// task asks the peer, with a2a-go's client, for its task id.
func (p *jsPeer) task(t *testing.T, id string) *a2a.Task {
	t.Helper()
	c, err := a2aclient.NewFromEndpoints(callCtx(t), []*a2a.AgentInterface{
		a2a.NewAgentInterface(p.base+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	task, err := c.GetTask(callCtx(t), &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
	if err != nil {
		t.Fatalf("the JS peer's task %s: %v", id, err)
	}
	return task
}

// jsFront writes the config of a front agent that delegates refunds to
// the JS peer, whose key its operator pinned (jwks_file and key_ids: the
// card must be signed by exactly that key), under a contract that wants a
// fresh receipt with an id.
func jsFront(t *testing.T, p *jsPeer) string {
	t.Helper()
	contract := writeFile(t, "refund.yaml", `skill: refund
version: "js-1"
artifacts:
  receipt:
    type: object
    required: [provider, receipt_id, amount_cents, observed_at]
    properties:
      provider: {type: string}
      receipt_id: {type: string}
      amount_cents: {type: integer, minimum: 1}
      observed_at: {type: string}
commit_requires:
  - {artifact: receipt, pointer: /receipt_id}
freshness: {artifact: receipt, pointer: /observed_at, max_age: 15m}
`)
	return writeFile(t, "front.yaml", fmt.Sprintf(`name: Front
description: delegates refunds to a JS SDK peer
auth: {anonymous: true}
log: {level: info}
limits: {shutdown_grace: 1s}
peers: [{name: js-payments, url: %q, trust: {jwks_file: %q, key_ids: [%q]}}]
skills:
  - {id: refund, name: Refund, executor: delegate, delegate: {skill: refund, tags: [payments], contract: %q, timeout: 2m}}
`, p.base, p.jwks, p.kid, contract))
}

// jsRestartCase is what TestJSPeerDelegationSurvivesKill9 checks for one
// card: the front's task state and status text, and the delegation's
// remote state and outcome, after the front came back.
type jsRestartCase struct {
	name, card      string
	graceful        bool // SIGINT, whose short grace ends while the peer works, instead of kill -9
	state           a2a.TaskState
	status          string
	remote, outcome string
	refunds         int
}

// TestJSPeerDelegationSurvivesKill9: the front delegates a refund to the
// JS SDK peer and is killed (kill -9) while the peer works; the peer's
// bank settles (or declines) while the front is down, and the SDK then
// answers a subscribe to the finished task with a JSON-RPC error in a
// JSON body. (Once more with a graceful stop whose grace ends first.)
// Restarted, the front ends in the peer's real final state: a
// settled refund is committed with exactly one ledger entry and one
// refund at the bank; a declined card fails with the peer's "card
// declined" in the task's status and in `handoff delegations`.
func TestJSPeerDelegationSurvivesKill9(t *testing.T) {
	peer := startJSPeer(t)
	for _, tc := range []jsRestartCase{
		{name: "settled", card: "4242424242424242", state: a2a.TaskStateCompleted, status: "Committed",
			remote: string(a2a.TaskStateCompleted), outcome: "committed", refunds: 1},
		{name: "declined", card: "4000000000000002", state: a2a.TaskStateFailed, status: `"card declined"`,
			remote: string(a2a.TaskStateFailed), outcome: "failed"},
		{name: "settled after a graceful stop", card: "4242424242424242", graceful: true, state: a2a.TaskStateCompleted,
			status: "Committed", remote: string(a2a.TaskStateCompleted), outcome: "committed", refunds: 1},
	} {
		t.Run(tc.name, func(t *testing.T) { jsPeerRestart(t, peer, tc) })
	}
}

func jsPeerRestart(t *testing.T, peer *jsPeer, tc jsRestartCase) {
	config, frontDir, order := jsFront(t, peer), t.TempDir(), uniqueID("order")
	front := serveConfig(t, "front", config, freeAddr(t), frontDir)
	if out := runHandoff(t, "peers", "--config", config, "--json"); !strings.Contains(out, `"state":"verified"`) {
		t.Fatalf("handoff peers: the JS SDK peer's card does not verify under the pinned key: %s", out)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"order": order, "amount_cents": 1250, "card": tc.card}))
	msg.Metadata = map[string]any{"handoff/skill": "refund"}
	res, err := jsonrpcClient(t, front).SendMessage(callCtx(t), &a2a.SendMessageRequest{Message: msg,
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("send to the front: %v", err)
	}
	local := res.(*a2a.Task).ID

	// The front has recorded the peer's task, and relayed its words.
	var rec *delegation.Record
	eventually(t, 20*time.Second, "the front records the peer's task and relays its progress", func() bool {
		task, err := jsonrpcClient(t, front).GetTask(callCtx(t), &a2a.GetTaskRequest{ID: local})
		if err != nil {
			t.Fatalf("get the front's task: %v", err)
		}
		if rec, _, err = delegation.RecordFrom(task.Metadata); err != nil {
			t.Fatalf("record: %v", err)
		}
		return rec != nil && rec.RemoteTaskID != "" && statusText(task.Status) == "reserving 1250 cents for order "+order
	})
	if !tc.graceful {
		front.kill9()
	} else if code := front.stop(os.Interrupt); code != 0 {
		t.Fatalf("front exited with code %d after SIGINT, want 0%s", code, front.exitReason(code))
	}

	// While the front is down, the peer's bank answers and its task ends.
	peer.settle(t, order)
	var remote *a2a.Task
	eventually(t, 20*time.Second, "the peer's task ends", func() bool {
		remote = peer.task(t, rec.RemoteTaskID)
		return remote.Status.State.Terminal()
	})
	if string(remote.Status.State) != tc.remote {
		t.Fatalf("the peer's task: %s %q, want %s", remote.Status.State, statusText(remote.Status), tc.remote)
	}

	front = serveConfig(t, "front (restarted)", config, freeAddr(t), frontDir)
	var final *a2a.Task
	eventually(t, 30*time.Second, "the front's task ends", func() bool {
		final, err = jsonrpcClient(t, front).GetTask(callCtx(t), &a2a.GetTaskRequest{ID: local})
		if err != nil {
			t.Fatalf("get the front's task after the restart: %v", err)
		}
		return final.Status.State.Terminal()
	})
	if final.Status.State != tc.state || !strings.Contains(statusText(final.Status), tc.status) {
		t.Fatalf("front's task after the restart: %s %q, want %s with %s", final.Status.State, statusText(final.Status), tc.state, tc.status)
	}
	if rec, _, err = delegation.RecordFrom(final.Metadata); err != nil || string(rec.RemoteState) != tc.remote || rec.Outcome != tc.outcome {
		t.Fatalf("final delegation record: %+v %v, want remote %s, outcome %s", rec, err, tc.remote, tc.outcome)
	}

	// `handoff delegations` shows where it stands, and why.
	table := runHandoff(t, "delegations", front.base)
	t.Logf("handoff delegations %s:\n%s", front.base, table)
	for _, want := range []string{string(local), rec.RemoteTaskID, tc.remote, tc.outcome} {
		if !strings.Contains(table, want) {
			t.Fatalf("handoff delegations lacks %q:\n%s", want, table)
		}
	}
	if tc.outcome != "committed" && !strings.Contains(table, `"card declined"`) {
		t.Fatalf("handoff delegations does not show the peer's reason:\n%s", table)
	}

	// The bank settled as many refunds as the ledger holds entries.
	if got := peer.refunds(t, order); len(got) != tc.refunds {
		t.Fatalf("the bank settled %d refunds of %s, want %d: %v", len(got), order, tc.refunds, got)
	}
	if code := front.stop(os.Interrupt); code != 0 {
		t.Fatalf("front exited with %d%s", code, front.exitReason(code))
	}
	l, err := acceptance.OpenBoltLedger(filepath.Join(frontDir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	entries, err := l.List(t.Context(), 0)
	if err != nil || len(entries) != tc.refunds {
		t.Fatalf("ledger: %+v %v, want %d entries", entries, err, tc.refunds)
	}
	if tc.refunds == 1 && (entries[0].DelegationID != string(local) || entries[0].Skill != "refund" || entries[0].EvidenceDigests["receipt"] == "") {
		t.Fatalf("ledger entry %+v, want the delegation %s with the receipt's digest", entries[0], local)
	}
}

// cardDigestAt fetches the card the agent at base serves and returns its
// delegation.CardDigest: the identity its provenance hops carry.
func cardDigestAt(t *testing.T, base string) string {
	t.Helper()
	code, body, err := httpGet(callCtx(t), base+"/.well-known/agent-card.json")
	if err != nil || code != 200 {
		t.Fatalf("fetch the card at %s: %d %v", base, code, err)
	}
	card, err := agentcard.ParseCard([]byte(body))
	if err != nil {
		t.Fatalf("the card at %s: %v", base, err)
	}
	d, err := delegation.CardDigest(card)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
