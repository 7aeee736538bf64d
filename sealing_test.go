package handoff

import (
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

var discard = slog.New(slog.DiscardHandler)

// secretFile writes a store secret for the test and returns its path.
func secretFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.secret")
	if err := os.WriteFile(path, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStoreConfigTiming: lease_ttl and claim_idle parse, are refused under
// a second or on the embedded store, with the file and line of the key.
func TestStoreConfigTiming(t *testing.T) {
	redis := minimalConfig + "store:\n  kind: redis\n  url: redis://127.0.0.1:6379/0\n"
	c, err := ParseConfig("agent.yaml", strings.NewReader(redis+"  lease_ttl: 2s\n  claim_idle: 3s\n  secret_key_files: [a.key, b.key]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.LeaseTTL.Duration != 2*time.Second || c.Store.claimIdle() != 3*time.Second || len(c.Store.SecretKeyFiles) != 2 {
		t.Fatalf("store: %+v", c.Store)
	}
	if c, err := ParseConfig("agent.yaml", strings.NewReader(minimalConfig)); err != nil || c.Store.LeaseTTL != nil || c.Store.claimIdle() != 0 {
		t.Fatalf("defaults: %+v, %v", c.Store, err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"short lease", redis + "  lease_ttl: 500ms\n", "agent.yaml:11: store.lease_ttl: 500ms is under the minimum of 1s"},
		{"short claim", redis + "  claim_idle: 999ms\n", "agent.yaml:11: store.claim_idle: 999ms is under the minimum of 1s"},
		{"lease on embedded", minimalConfig + "store:\n  lease_ttl: 6s\n", "agent.yaml:9: store.lease_ttl: is only for kind redis"},
		{"claim on embedded", minimalConfig + "store: {claim_idle: 6s}\n", "store.claim_idle: is only for kind redis"},
		{"empty secret file", redis + "  secret_key_files: ['']\n", "store.secret_key_files[0]: is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.yaml", strings.NewReader(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestStoreSealerKeys: the keys that seal push secrets come from
// secret_key_files, else from the signing keys; on Redis without either the
// agent refuses to start, and a short secret is refused.
func TestStoreSealerKeys(t *testing.T) {
	c := testConfig(t)
	c.Store = StoreConfig{Kind: "redis", URL: "redis://127.0.0.1:6379/0", Namespace: "never-opened"}
	if _, err := New(t.Context(), c); err == nil || !strings.Contains(err.Error(), "store.secret_key_files or signing.keys") {
		t.Fatalf("Redis without shared keys: %v", err)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Store.SecretKeyFiles = []string{secretFile(t), short}
	if _, err := New(t.Context(), c); err == nil || !strings.Contains(err.Error(), "9 bytes, under the minimum of 32") {
		t.Fatalf("a short secret: %v", err)
	}

	// Signing keys: what a set of two seals opens with the same set, and
	// with the new key first (a rotation), but not with another key alone.
	dir := t.TempDir()
	var keys []SigningKeyConfig
	for _, name := range []string{"old", "new"} {
		jwk, err := agentcard.GenerateKey(jose.EdDSA, name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".jwk")
		if err := agentcard.WriteKeyFile(path, jwk); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, SigningKeyConfig{File: path})
	}
	sealerFor := func(keys ...SigningKeyConfig) *tasks.Sealer {
		t.Helper()
		c := testConfig(t)
		c.Signing.Keys = keys
		ks, err := loadKeySet(c, discard)
		if err != nil {
			t.Fatal(err)
		}
		s, err := storeSealer(c, ks)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	path := filepath.Join(t.TempDir(), "tasks.db")
	put := func(s *tasks.Sealer, id string) {
		st, err := boltstore.Open(path, time.Second, boltstore.WithSealer(s))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if id == "t1" {
			snap := &tasks.Snapshot{Owner: tasks.Owner{Principal: "p"}, Version: 1, Updated: time.Now(),
				Task: &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}}
			if err := st.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.PutPushConfig(t.Context(), tasks.Owner{Principal: "p"}, &a2a.PushConfig{TaskID: "t1", ID: id, URL: "https://hook", Token: "tok-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(s *tasks.Sealer, id string) error {
		st, err := boltstore.Open(path, time.Second, boltstore.WithSealer(s))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		cfg, err := st.GetPushConfig(t.Context(), tasks.Owner{Principal: "p"}, "t1", id)
		if err == nil && cfg.Token != "tok-"+id {
			t.Fatalf("token %q", cfg.Token)
		}
		return err
	}
	put(sealerFor(keys[0]), "t1")
	if err := get(sealerFor(keys[0], keys[1]), "t1"); err != nil {
		t.Fatalf("with the old key still configured: %v", err)
	}
	if err := get(sealerFor(keys[1]), "t1"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("with the old key gone: %v, want ErrUnsealable", err)
	}
}

// TestAgentSealsPushSecrets: the store an agent opens seals: a push config
// it stored cannot be read from its file without the agent's keys.
func TestAgentSealsPushSecrets(t *testing.T) {
	c := testConfig(t)
	ks, err := loadKeySet(c, discard)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(t.Context(), c, ks)
	if err != nil {
		t.Fatal(err)
	}
	owner := tasks.Owner{Principal: "p"}
	snap := &tasks.Snapshot{Owner: owner, Version: 1, Updated: time.Now(),
		Task: &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}}
	if err := st.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPushConfig(t.Context(), owner, &a2a.PushConfig{TaskID: "t1", ID: "a", URL: "https://hook", Token: "tok-secret"}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetPushConfig(t.Context(), owner, "t1", "a"); err != nil || got.Token != "tok-secret" {
		t.Fatalf("through the agent's store: %+v, %v", got, err)
	}
	st.Close()
	raw, err := os.ReadFile(filepath.Join(c.DataDir, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "tok-secret") {
		t.Fatal("tasks.db holds the token in clear")
	}
	plain, err := boltstore.Open(filepath.Join(c.DataDir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.GetPushConfig(t.Context(), owner, "t1", "a"); !errors.Is(err, tasks.ErrUnsealable) {
		t.Fatalf("without the keys: %v, want ErrUnsealable", err)
	}
}
