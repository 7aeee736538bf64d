package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/artifacts"
	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/mcp"
)

// TestLedgerAndAuditOnRedis: on a Redis store, the commit ledger, the
// delegations index and the audit log live in Redis, shared by the
// replicas: a delegation committed on replica A is in the ledger replica B
// reads, B lists it, its evidence is in the artifacts_dir they share, and
// neither replica writes ledger.db, audit.db or artifacts in its data_dir.
func TestLedgerAndAuditOnRedis(t *testing.T) {
	common, peer := startNotesPeer(t)
	ns := redistest.Namespace(t, "handoff-test-")
	// The replicas share an artifacts_dir.
	shared := t.TempDir()
	front := "name: Front\ndescription: delegates\n" + common + fmt.Sprintf(`store: {kind: redis, url: "redis://127.0.0.1:6379/0", namespace: %q, secret_key_files: [%q], artifacts_dir: %q}
peers: [{name: peer, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: honest, name: H, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
`, ns, secretFile(t), shared, peer, peer+"/.well-known/", writeContract(t, t.TempDir(), "honest", "/notes", "result.notes == evidence.notes__stats.notes"))
	replicaA := startFromYAML(t, "front.yaml", front)
	replicaB := startFromYAML(t, "front.yaml", front)

	_, out := call(t, replicaA, "", "", "SendMessage",
		`{"message":{"messageId":"m-honest","role":"ROLE_USER","metadata":{"handoff/skill":"honest"},"parts":[{"data":{}}]}}`)
	task := resultTask(t, out)
	if state(task) != "TASK_STATE_COMPLETED" {
		t.Fatalf("honest on A: %s %v", state(task), task["status"])
	}
	id := task["id"].(string)

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	l, err := acceptance.NewRedisLedger(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Get(t.Context(), id)
	if err != nil || e.Skill != "honest" {
		t.Fatalf("ledger entry of %s in Redis: %+v, %v", id, e, err)
	}
	// The evidence the entry names is in the shared artifacts_dir.
	arts, err := artifacts.NewStore(shared)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := arts.Get(t.Context(), e.EvidenceDigests["notes__stats"]); err != nil || len(a.Parts) == 0 {
		t.Fatalf("evidence %v in the shared artifacts_dir: %v, %v", e.EvidenceDigests, a, err)
	}
	audit, err := mcp.NewRedisAudit(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	// The gate's verifier ran notes__stats through A's pipeline.
	if recs, err := audit.List(t.Context(), mcp.AuditFilter{Principal: "handoff:gate"}); err != nil || len(recs) == 0 || recs[0].Tool != "notes__stats" {
		t.Fatalf("audit records of the gate in Redis: %+v, %v", recs, err)
	}

	resp, err := http.Get(replicaB + "/a2a/delegations")
	if err != nil {
		t.Fatal(err)
	}
	var listed struct{ Delegations []acceptance.Delegation }
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil || len(listed.Delegations) != 1 || listed.Delegations[0].TaskID != id || listed.Delegations[0].Outcome != "committed" {
		t.Fatalf("delegations listed by B: %+v, %v", listed, err)
	}

	for _, url := range []string{replicaA, replicaB} {
		for _, f := range []string{"ledger.db", "audit.db", "artifacts"} {
			if _, err := os.Stat(filepath.Join(frontDir(t, url), f)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s wrote %s on a Redis store: %v", url, f, err)
			}
		}
	}
}
