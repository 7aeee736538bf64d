package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/internal/auth"
)

func TestKeysGen(t *testing.T) {
	dir := t.TempDir()
	key, jwks := filepath.Join(dir, "k.jwk"), filepath.Join(dir, "k.jwks")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "gen", "--out", key, "--alg", "ES256", "--kid", "k1", "--jwks", jwks}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kid k1") {
		t.Fatalf("output: %s", out.String())
	}
	info, err := os.Stat(key)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", info, err)
	}
	pub, _ := os.ReadFile(jwks)
	if !strings.Contains(string(pub), `"k1"`) || strings.Contains(string(pub), `"d"`) {
		t.Fatalf("JWKS: %s", pub)
	}
	if err := run(t.Context(), []string{"keys", "gen", "--out", key}, &out, &out); err == nil || !strings.Contains(err.Error(), "exist") {
		t.Fatalf("overwrite: %v", err)
	}
	if err := run(t.Context(), []string{"keys", "gen", "--out", filepath.Join(dir, "x"), "--alg", "HS256"}, &out, &out); exitCode(err) != 2 {
		t.Fatalf("HS256: %v", err)
	}
}

func TestKeysHash(t *testing.T) {
	var out bytes.Buffer
	if err := runKeysHash(nil, strings.NewReader("s3cret\n"), &out); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != auth.HashAPIKey("s3cret") {
		t.Fatalf("hash %q", out.String())
	}
	if err := runKeysHash([]string{"s3cret"}, strings.NewReader(""), &out); exitCode(err) != 2 {
		t.Fatalf("key as an argument: %v", err)
	}
}

func TestCardVerifyAndShow(t *testing.T) {
	url := startHandoff(t, "k3y")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"card", "verify", url}, &out, &out); err != nil || !strings.Contains(out.String(), "verified: signed by key ") {
		t.Fatalf("verify: %v %s", err, out.String())
	}
	out.Reset()
	err := run(t.Context(), []string{"card", "verify", url, "--kid", "someone-else"}, &out, &out)
	if !errors.Is(err, errNotVerified) || exitCode(err) != 1 || !strings.Contains(out.String(), "NOT VERIFIED") {
		t.Fatalf("wrong kid: %v %s", err, out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"card", "show", url}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name:", "signature: verified", "security:", "API key in header X-Agent-Key", "interface:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("card show lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTrustFlag(t *testing.T) {
	url := startHandoff(t, "k3y")
	other := filepath.Join(t.TempDir(), "other.jwks")
	var out bytes.Buffer
	if err := run(t.Context(), []string{"keys", "gen", "--out", other + ".jwk", "--jwks", other}, &out, &out); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"send", url, "hi", "--api-key", "k3y", "--trust", "origin"}, &out, &out); err != nil {
		t.Fatalf("--trust origin: %v", err)
	}
	err := run(t.Context(), []string{"send", url, "hi", "--api-key", "k3y", "--trust", other}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "not trusted") {
		t.Fatalf("--trust with another key: %v", err)
	}
}
