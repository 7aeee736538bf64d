package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestPeers(t *testing.T) {
	good := startHandoff(t, "k")
	dir := t.TempDir()
	other := filepath.Join(dir, "other.jwks")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "gen", "--out", other + ".jwk", "--jwks", other}, &out, &out); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "agent.yaml")
	yaml := fmt.Sprintf(`name: A
description: B
auth: {anonymous: true}
skills: [{id: s, name: S, executor: tck}]
peers:
  - {name: trusted, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: pinned-elsewhere, url: %q, trust: {jwks_file: %q}}
`, good, good+"/.well-known/", good, other)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"peers", "--config", cfg, "--json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	rows := decodeLines[struct {
		Name, State, Kid, Reason string
		Skills                   []string
	}](t, out.String())
	if len(rows) != 2 || rows[0].State != "verified" || rows[0].Kid == "" || len(rows[0].Skills) != 1 {
		t.Fatalf("trusted peer: %+v", rows)
	}
	if rows[1].State != "refused" || rows[1].Reason == "" || len(rows[1].Skills) != 0 {
		t.Fatalf("peer pinned to another key: %+v", rows[1])
	}
}
