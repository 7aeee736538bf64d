package handoff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/internal/redistest"
)

// TestReplicasServeOneSignedCard: replicas of one agent on one Redis
// namespace, given the same signing key and public_url in config, serve
// byte-identical signed cards and JWKS, so a peer verifies whichever replica
// the load balancer picks; a replica left to make its own key does not.
func TestReplicasServeOneSignedCard(t *testing.T) {
	ns := redistest.Namespace(t, "handoff-test-")
	jwk, err := agentcard.GenerateKey(jose.EdDSA, "shared-1")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "signing.jwk")
	if err := agentcard.WriteKeyFile(keyFile, jwk); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf(`name: Replicated
description: one agent, several replicas
public_url: https://agent.example.com
auth: {anonymous: true}
log: {level: error}
store: {kind: redis, url: "redis://127.0.0.1:6379/0", namespace: %q, secret_key_files: [%q]}
skills: [{id: echo, name: Echo, executor: tck}]
`, ns, secretFile(t))
	shared := base + fmt.Sprintf("signing: {keys: [{file: %q}]}\n", keyFile)
	a := startFromYAML(t, "a.yaml", shared)
	b := startFromYAML(t, "b.yaml", shared)
	own := startFromYAML(t, "own.yaml", base) // its own key, made in its own data_dir

	get := func(url string) []byte {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
		}
		return body
	}
	cardA, cardB := get(a+"/.well-known/agent-card.json"), get(b+"/.well-known/agent-card.json")
	if !bytes.Equal(cardA, cardB) {
		t.Fatalf("replicas serve different cards:\nA: %s\nB: %s", cardA, cardB)
	}
	var card struct {
		Signatures []struct {
			Protected string `json:"protected"`
			Signature string `json:"signature"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(cardA, &card); err != nil || len(card.Signatures) == 0 || card.Signatures[0].Signature == "" {
		t.Fatalf("the replicas' card carries no signature (%v): %s", err, cardA)
	}
	jwksA, jwksB := get(a+"/.well-known/jwks.json"), get(b+"/.well-known/jwks.json")
	if !bytes.Equal(jwksA, jwksB) {
		t.Fatalf("replicas serve different JWKS:\nA: %s\nB: %s", jwksA, jwksB)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwksA, &set); err != nil || len(set.Key("shared-1")) != 1 {
		t.Fatalf("the JWKS lacks the configured key shared-1 (%v): %s", err, jwksA)
	}
	if other := get(own + "/.well-known/agent-card.json"); bytes.Equal(other, cardA) {
		t.Fatalf("a replica with its own key serves the shared card: the comparison above proves nothing")
	}
}
