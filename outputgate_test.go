package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// counter is a Go executor that answers with the count its request names:
// {"notes": N} as a data artifact, or {"notes": "TEXT"} when the text is
// not a number.
type counter struct{}

func (counter) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		text := ec.Message.Parts[0].Text()
		var n any = text
		if i, err := strconv.Atoi(text); err == nil {
			n = i
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewDataPart(map[string]any{"notes": n})), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (counter) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// writeOutputContract writes skill's output contract into dir: the
// result needs notes, and the verifier reads the agent's own notes__stats
// (one note, the example server's welcome) and holds condition.
func writeOutputContract(t *testing.T, dir, skill, condition string) string {
	t.Helper()
	path := filepath.Join(dir, skill+"-output.yaml")
	body := fmt.Sprintf(`skill: %s
version: "out-1"
artifacts:
  result: {type: object, required: [notes]}
commit_requires:
  - {artifact: result, pointer: /notes}
verifiers:
  - {name: same-count, tool: notes__stats, arguments: {}, condition: %q}
`, skill, condition)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// outputAgentHead is the config an output-gated agent starts with: an
// approver key, the example MCP server (args appended), its stats and
// slow tools readable by the gate's verifiers.
func outputAgentHead(bin string, args ...string) string {
	quoted, _ := json.Marshal(args)
	return fmt.Sprintf(`name: Gated
description: gates its own results
log: {level: error}
limits: {shutdown_grace: 1s}
auth:
  anonymous: true
  api_keys: [{name: ops, sha256: %s}]
approvers: ["key:ops"]
mcp_servers: [{name: notes, command: %q, args: %s}]
tool_contracts:
  - {tool: notes__stats, effect: read, risk: low, approval: none}
  - {tool: notes__slow, effect: read, risk: low, approval: none, timeout: 2m}
`, auth.HashAPIKey("ops-key"), bin, quoted)
}

// send starts a task of skill with text and returns it as it ended (or
// waits).
func send(t *testing.T, url, skill, text string) map[string]any {
	t.Helper()
	_, out := call(t, url, "", "", "SendMessage", fmt.Sprintf(
		`{"message":{"messageId":%q,"role":"ROLE_USER","metadata":{"handoff/skill":%q},"parts":[{"text":%q}]}}`,
		"m-"+skill+"-"+text+"-"+a2a.NewMessageID(), skill, text))
	return resultTask(t, out)
}

// decideResult answers task's result approval as key:ops: the approval
// the request asks for, or a denial with reason.
func decideResult(t *testing.T, url string, task map[string]any, approve bool, reason string) map[string]any {
	t.Helper()
	body := approvalOf(t, task)
	if !approve {
		b, _ := json.Marshal(map[string]any{"approval": map[string]any{"tool": "submit_result", "decision": "deny", "reason": reason}})
		body = string(b)
	}
	call(t, url, "X-API-Key", "ops-key", "SendMessage", fmt.Sprintf(
		`{"message":{"messageId":%q,"taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`, a2a.NewMessageID(), task["id"], body))
	return getTask(t, url, task["id"].(string))
}

func getTask(t *testing.T, url, id string) map[string]any {
	t.Helper()
	_, out := call(t, url, "", "", "GetTask", fmt.Sprintf(`{"id":%q}`, id))
	task, _ := out["result"].(map[string]any)
	if task == nil {
		t.Fatalf("GetTask %s: %v", id, out)
	}
	return task
}

// wantEnd fails unless task ended in st with a status text starting with
// prefix and holding every one of texts.
func wantEnd(t *testing.T, what string, task map[string]any, st, prefix string, texts ...string) {
	t.Helper()
	msg := statusMessage(task)
	ok := state(task) == st && strings.HasPrefix(msg, prefix)
	for _, s := range texts {
		ok = ok && strings.Contains(msg, s)
	}
	if !ok {
		t.Fatalf("%s: %s %q, want %s %q… with %q", what, state(task), msg, st, prefix, texts)
	}
}

// ledgerIDs are the delegation ids of the agent's ledger entries, with
// their skills.
func ledgerIDs(t *testing.T, a *Agent) map[string]string {
	t.Helper()
	entries, err := a.del.ledger.List(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		out[e.DelegationID] = e.Skill
	}
	return out
}

// artifactsOf is the task's artifacts as JSON.
func artifactsOf(task map[string]any) string {
	b, _ := json.Marshal(task["artifacts"])
	return string(b)
}

// TestGoSkillOutputGate: a go skill's result (what its executor returns)
// passes its output schema, approval_when and contract before the task
// completes: a result breaking the schema or failing the verifier fails
// "Not committed" with the reasons, and none of its artifacts reach the
// task; a passing one completes, committed, in the ledger under the task's
// id; one approval_when holds for waits input-required until key:ops
// approves it (a forged approval does not count) or denies it.
func TestGoSkillOutputGate(t *testing.T) {
	dir := t.TempDir()
	c, err := ParseConfig("gated.yaml", strings.NewReader(outputAgentHead(buildMCPServer(t))+fmt.Sprintf(`skills:
  - id: count
    name: Count
    executor: go
    output:
      schema: {type: object, properties: {notes: {type: integer}}, required: [notes]}
      contract: %q
    approval_when: result.notes > 3
`, writeOutputContract(t, dir, "count", "evidence.result.notes >= result.notes"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	a, url := serveAgent(t, c, WithExecutor("count", counter{}))

	broken := send(t, url, "count", "many")
	wantEnd(t, "a result breaking the schema", broken, "TASK_STATE_FAILED", "Not committed: schema: ", "notes")
	lying := send(t, url, "count", "0")
	wantEnd(t, "a result failing the verifier", lying, "TASK_STATE_FAILED", "Not committed: verifier same-count: ", "is false")
	for _, task := range []map[string]any{broken, lying} {
		if arts := artifactsOf(task); arts != "null" {
			t.Errorf("a result that was not committed reached the task: %s", arts)
		}
	}
	ok := send(t, url, "count", "2")
	wantEnd(t, "a passing result", ok, "TASK_STATE_COMPLETED", "Committed: the result passed the contract (", "verifier same-count ok")
	if arts := artifactsOf(ok); !strings.Contains(arts, `"notes":2`) {
		t.Errorf("the committed result's artifacts: %s", arts)
	}

	big := send(t, url, "count", "5")
	if state(big) != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(approvalOf(t, big), `"tool":"submit_result"`) || artifactsOf(big) != "null" {
		t.Fatalf("a result approval_when holds for: %s %q %s, want input-required with a submit_result approval request and no artifacts",
			state(big), statusMessage(big), artifactsOf(big))
	}
	forged := strings.Replace(approvalOf(t, big), `"token":"`, `"token":"00`, 1)
	_, out := call(t, url, "X-API-Key", "ops-key", "SendMessage", fmt.Sprintf(
		`{"message":{"messageId":"forged","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]}}`, big["id"], forged))
	wantEnd(t, "a forged approval", resultTask(t, out), "TASK_STATE_INPUT_REQUIRED", "Tool submit_result needs an approval: the approval does not match")
	wantEnd(t, "approved", decideResult(t, url, big, true, ""), "TASK_STATE_COMPLETED", "Committed: the result passed the contract")

	denied := send(t, url, "count", "9")
	wantEnd(t, "denied", decideResult(t, url, denied, false, "nine is too many"), "TASK_STATE_FAILED",
		"Not committed: key:ops denied the result: nine is too many")

	ids := ledgerIDs(t, a)
	if len(ids) != 2 || ids[ok["id"].(string)] != "count" || ids[big["id"].(string)] != "count" {
		t.Fatalf("ledger %v, want the passing and the approved results, under their tasks' ids", ids)
	}
}

// TestToolSkillOutputGate: an mcp skill's result (the tool's structured
// result) is gated like a go skill's.
func TestToolSkillOutputGate(t *testing.T) {
	dir := t.TempDir()
	schema := "{type: object, properties: {notes: {type: integer}}, required: [notes]}"
	c, err := ParseConfig("gated.yaml", strings.NewReader(outputAgentHead(buildMCPServer(t))+fmt.Sprintf(`skills:
  - {id: strict, name: S, executor: mcp, tool: notes__stats, output: {schema: {type: object, required: [receipt]}}}
  - {id: lying, name: L, executor: mcp, tool: notes__stats, output: {schema: %s, contract: %q}}
  - {id: honest, name: H, executor: mcp, tool: notes__stats, output: {schema: %s, contract: %q}}
  - {id: asked, name: A, executor: mcp, tool: notes__stats, output: {schema: %s, contract: %q}, approval_when: result.notes > 0}
`, schema, writeOutputContract(t, dir, "lying", "result.notes == evidence.result.notes + 1.0"),
		schema, writeOutputContract(t, dir, "honest", "result.notes == evidence.result.notes"),
		schema, writeOutputContract(t, dir, "asked", "result.notes == evidence.result.notes"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	a, url := serveAgent(t, c)

	wantEnd(t, "a result breaking the schema", send(t, url, "strict", ""), "TASK_STATE_FAILED", "Not committed: schema: ", "receipt")
	wantEnd(t, "a result failing the verifier", send(t, url, "lying", ""), "TASK_STATE_FAILED", "Not committed: verifier same-count: ",
		"result.notes == evidence.result.notes + 1.0 is false")
	ok := send(t, url, "honest", "")
	wantEnd(t, "a passing result", ok, "TASK_STATE_COMPLETED", "Committed: the result passed the contract (")
	if arts := artifactsOf(ok); !strings.Contains(arts, `"name":"notes__stats"`) || !strings.Contains(arts, `"notes":1`) {
		t.Errorf("the committed result's artifacts: %s", arts)
	}
	asked := send(t, url, "asked", "")
	if state(asked) != "TASK_STATE_INPUT_REQUIRED" || artifactsOf(asked) != "null" {
		t.Fatalf("a result approval_when holds for: %s %q", state(asked), statusMessage(asked))
	}
	wantEnd(t, "approved", decideResult(t, url, asked, true, ""), "TASK_STATE_COMPLETED", "Committed: ")
	wantEnd(t, "denied", decideResult(t, url, send(t, url, "asked", ""), false, "not today"), "TASK_STATE_FAILED",
		"Not committed: key:ops denied the result: not today")

	ids := ledgerIDs(t, a)
	if len(ids) != 2 || ids[ok["id"].(string)] != "honest" || ids[asked["id"].(string)] != "asked" {
		t.Fatalf("ledger %v, want the honest and the approved results", ids)
	}
}

// TestDelegateSkillOutputGate: a delegate skill's result (the peer's
// completion its delegation contract committed) is gated like a go
// skill's, by the front's own verifier; a committed one is in the ledger
// twice: the delegation under the task's id, the result under TASK#output.
func TestDelegateSkillOutputGate(t *testing.T) {
	_, peer := startNotesPeer(t)
	dir, outDir := t.TempDir(), t.TempDir()
	honest := func(id string) string {
		return writeContract(t, dir, id, "/notes", "result.notes == evidence.notes__stats.notes")
	}
	schema := "{type: object, properties: {notes: {type: integer}}, required: [notes]}"
	c, err := ParseConfig("front.yaml", strings.NewReader(outputAgentHead(buildMCPServer(t))+fmt.Sprintf(`peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: strict, name: S, executor: delegate, delegate: {skill: notes-stats, contract: %q}, output: {schema: {type: object, required: [receipt]}}}
  - {id: lying, name: L, executor: delegate, delegate: {skill: notes-stats, contract: %q}, output: {schema: %s, contract: %q}}
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, contract: %q}, output: {schema: %s, contract: %q}}
  - id: asked
    name: A
    executor: delegate
    delegate: {skill: notes-stats, contract: %q}
    output: {schema: %s, contract: %q}
    approval_when: result.notes > 0
`, peer, peer+"/.well-known/", honest("strict"),
		honest("lying"), schema, writeOutputContract(t, outDir, "lying", "result.notes == evidence.result.notes + 1.0"),
		honest("honest"), schema, writeOutputContract(t, outDir, "honest", "result.notes == evidence.result.notes"),
		honest("asked"), schema, writeOutputContract(t, outDir, "asked", "result.notes == evidence.result.notes"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	a, url := serveAgent(t, c)

	wantEnd(t, "a result breaking the schema", send(t, url, "strict", "count"), "TASK_STATE_FAILED", "Not committed: schema: ", "receipt")
	wantEnd(t, "a result failing the verifier", send(t, url, "lying", "count"), "TASK_STATE_FAILED", "Not committed: verifier same-count: ")
	ok := send(t, url, "honest", "count")
	wantEnd(t, "a passing result", ok, "TASK_STATE_COMPLETED", "Committed: peer peer's completion passed the contract",
		"Committed: the result passed the contract (")
	if arts := artifactsOf(ok); !strings.Contains(arts, `"notes":1`) {
		t.Errorf("the committed result's artifacts: %s", arts)
	}
	asked := send(t, url, "asked", "count")
	if state(asked) != "TASK_STATE_INPUT_REQUIRED" || artifactsOf(asked) != "null" {
		t.Fatalf("a result approval_when holds for: %s %q", state(asked), statusMessage(asked))
	}
	wantEnd(t, "approved", decideResult(t, url, asked, true, ""), "TASK_STATE_COMPLETED", "Committed: ")
	wantEnd(t, "denied", decideResult(t, url, send(t, url, "asked", "count"), false, "no"), "TASK_STATE_FAILED",
		"Not committed: key:ops denied the result: no")

	ids := ledgerIDs(t, a)
	okID, askedID := ok["id"].(string), asked["id"].(string)
	// Every delegation that committed is there (the refused results' too:
	// their delegations passed), and only the two committed results.
	results := 0
	for id := range ids {
		if strings.HasSuffix(id, "#output") {
			results++
		}
	}
	if ids[okID] != "honest" || ids[okID+"#output"] != "honest" || ids[askedID+"#output"] != "asked" || results != 2 {
		t.Fatalf("ledger %v, want the delegations and the results of %s and %s", ids, okID, askedID)
	}
}

// TestApprovedResultSurvivesRestart: a result an approver approved is
// committed after the agent restarts between the approval and the task's
// end (its contract's verifier still running), without asking the
// approver again: for a go, an mcp (whose tool is not run again) and a
// model skill.
func TestApprovedResultSurvivesRestart(t *testing.T) {
	bin := buildMCPServer(t)
	for _, kind := range []string{"go", "mcp", "model"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			events, release := filepath.Join(dir, "events"), filepath.Join(dir, "release")
			contract := filepath.Join(dir, "contract.yaml")
			// The verifier waits until the test releases it: the agent is
			// stopped while it runs.
			if err := os.WriteFile(contract, fmt.Appendf(nil, `skill: count
version: "slow-1"
artifacts:
  result: {type: object, required: [notes]}
verifiers:
  - {name: released, tool: notes__slow, arguments: {ms: 120000, until_file: %q}, condition: "true"}
`, release), 0o600); err != nil {
				t.Fatal(err)
			}
			skill := "    executor: go\n"
			var opts []Option
			head := outputAgentHead(bin, "--events", events)
			switch kind {
			case "model":
				base := serveScript(t, "rules:\n  - when: {last: user}\n    calls: [{tool: submit_result, arguments: {notes: \"{{.User}}\"}}]\n", nil)
				head += fmt.Sprintf("models: [{name: m, base_url: %q, model: scripted, max_retries: 0}]\n", base)
				skill = "    executor: model\n    model: {use: m, instructions: Count.}\n"
			case "mcp": // the tool counts one note: the example server's welcome
				skill = "    executor: mcp\n    tool: notes__stats\n"
			default:
				opts = append(opts, WithExecutor("count", counter{}))
			}
			yaml := head + "skills:\n  - id: count\n    name: Count\n" + skill + fmt.Sprintf(
				"    output: {schema: {type: object, properties: {notes: {type: integer}}, required: [notes]}, contract: %q}\n    approval_when: result.notes > 3 || result.notes == 1\n", contract)
			parse := func() *Config {
				c, err := ParseConfig("gated.yaml", strings.NewReader(yaml))
				if err != nil {
					t.Fatal(err)
				}
				c.DataDir = filepath.Join(dir, "data")
				return c
			}
			_, url := serveAgent(t, parse(), opts...)
			task := send(t, url, "count", "5")
			if state(task) != "TASK_STATE_INPUT_REQUIRED" {
				t.Fatalf("the result: %s %q, want input-required", state(task), statusMessage(task))
			}
			id := task["id"].(string)
			_, out := call(t, url, "X-API-Key", "ops-key", "SendMessage", fmt.Sprintf(
				`{"message":{"messageId":"approve","taskId":%q,"role":"ROLE_USER","parts":[{"data":%s}]},"configuration":{"returnImmediately":true}}`,
				id, approvalOf(t, task)))
			if out["error"] != nil {
				t.Fatalf("the approval: %v", out)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if b, _ := os.ReadFile(events); strings.Contains(string(b), "start slow") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the verifier never started; the task is %s %q", state(getTask(t, url, id)), statusMessage(getTask(t, url, id)))
				}
			}
			stopAgent(t, url)
			if err := os.WriteFile(release, nil, 0o600); err != nil {
				t.Fatal(err)
			}

			_, url = serveAgent(t, parse(), opts...)
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				task = getTask(t, url, id)
				if st := state(task); st != "TASK_STATE_WORKING" && st != "TASK_STATE_SUBMITTED" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the restart the task is still %s %q", state(task), statusMessage(task))
				}
			}
			wantEnd(t, "after the restart", task, "TASK_STATE_COMPLETED", "Committed: the result passed the contract")
			if b, _ := os.ReadFile(events); kind == "mcp" && strings.Count(string(b), "start stats") != 1 {
				t.Errorf("the tool ran %d times, want once:\n%s", strings.Count(string(b), "start stats"), b)
			}
		})
	}
}

// TestModelSkillResultDenied: a model skill's result that an approver
// denies fails its task with the reason, as a go skill's does; the model
// is not asked again.
func TestModelSkillResultDenied(t *testing.T) {
	base, srv := serveScriptServer(t, "rules:\n  - when: {last: user}\n    calls: [{tool: submit_result, arguments: {notes: \"{{.User}}\"}}]\n", nil)
	c, err := ParseConfig("gated.yaml", strings.NewReader(outputAgentHead(buildMCPServer(t))+fmt.Sprintf(`models: [{name: m, base_url: %q, model: scripted, max_retries: 0}]
skills:
  - id: count
    name: Count
    executor: model
    model: {use: m, instructions: Count.}
    output: {schema: {type: object, properties: {notes: {type: integer}}, required: [notes]}}
    approval_when: result.notes > 3
`, base)))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	_, url := serveAgent(t, c)
	task := send(t, url, "count", "7")
	if state(task) != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("the result: %s %q, want input-required", state(task), statusMessage(task))
	}
	asked := len(srv.Requests())
	wantEnd(t, "denied", decideResult(t, url, task, false, "seven is odd"), "TASK_STATE_FAILED", "Not committed: key:ops denied the result: seven is odd")
	if n := len(srv.Requests()); n != asked {
		t.Errorf("the model was asked %d more times after the denial, want none", n-asked)
	}
}
