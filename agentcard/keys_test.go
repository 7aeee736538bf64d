package agentcard_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

func TestKeyFile(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		t.Run(string(alg), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "signing.jwk")
			key := mustKey(t, alg, "")
			if err := agentcard.WriteKeyFile(path, key); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, want 0600", st.Mode().Perm())
			}
			other := mustKey(t, alg, "other")
			if err := agentcard.WriteKeyFile(path, other); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("overwrite: %v, want fs.ErrExist", err)
			}
			loaded, err := agentcard.LoadKeyFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if loaded.KeyID != key.KeyID || loaded.Algorithm != string(alg) || key.KeyID == "" {
				t.Fatalf("loaded kid %q alg %q, wrote kid %q", loaded.KeyID, loaded.Algorithm, key.KeyID)
			}
			// The loaded key signs what the written key's public half verifies.
			if _, err := newVerifier(t, pinned(key)).Verify(t.Context(), mustSign(t, testCard(), loaded, "")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadKeyFileRefuses(t *testing.T) {
	pub, err := json.Marshal(mustKey(t, jose.EdDSA, "p").Public())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"public only":  string(pub),
		"symmetric":    `{"kty":"oct","kid":"s","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY"}`,
		"not a JWK":    `{"kty":`,
		"wrong alg":    strings.Replace(string(pub), `"alg":"EdDSA"`, `"alg":"ES256"`, 1),
		"unknown type": `{"kty":"XYZ","kid":"x"}`,
	}
	for name, body := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k.jwk")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := agentcard.LoadKeyFile(path); !errors.Is(err, agentcard.ErrUnsupportedKey) {
				t.Fatalf("LoadKeyFile = %v, want ErrUnsupportedKey", err)
			}
		})
	}
	if _, err := agentcard.LoadKeyFile(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent file: %v", err)
	}
	if _, err := agentcard.GenerateKey(jose.HS256, ""); !errors.Is(err, agentcard.ErrUnsupportedKey) {
		t.Fatalf("GenerateKey(HS256) = %v", err)
	}
	if _, err := agentcard.Sign(testCard(), ptr(mustKey(t, jose.EdDSA, "p").Public()), ""); !errors.Is(err, agentcard.ErrUnsupportedKey) {
		t.Fatalf("Sign with a public key = %v", err)
	}
}

func TestKeySetRotation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	k1, k2 := mustKey(t, jose.EdDSA, "k1"), mustKey(t, jose.ES256, "k2")
	keep := 7 * day

	// k2 is published a day before it starts signing.
	ks, err := agentcard.NewKeySet(keep, agentcard.Key{JWK: k1, NotBefore: t0}, agentcard.Key{JWK: k2, NotBefore: t0.Add(30 * day)})
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, ks, t0.Add(29*day), "k1", "k1", "k2")
	checkSet(t, ks, t0.Add(30*day), "k2", "k1", "k2")
	if _, err := ks.SigningKey(t0.Add(-time.Second)); !errors.Is(err, agentcard.ErrNoSigningKey) {
		t.Fatalf("SigningKey before any key = %v", err)
	}

	// k1 retired at day 31: published until day 38, then gone.
	retired := t0.Add(31 * day)
	ks, err = agentcard.NewKeySet(keep, agentcard.Key{JWK: k1, NotBefore: t0, RetiredAt: retired}, agentcard.Key{JWK: k2, NotBefore: t0.Add(30 * day)})
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, ks, retired.Add(keep-time.Second), "k2", "k1", "k2")
	checkSet(t, ks, retired.Add(keep), "k2", "k2")

	jwks, err := ks.JWKS(retired)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(jwks), `"d"`) {
		t.Fatalf("JWKS publishes a private part: %s", jwks)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil || len(set.Keys) != 2 || !set.Keys[0].IsPublic() {
		t.Fatalf("JWKS %s: %v", jwks, err)
	}

	if _, err := agentcard.NewKeySet(keep, agentcard.Key{JWK: k1}, agentcard.Key{JWK: k1}); err == nil {
		t.Fatal("NewKeySet accepted a kid twice")
	}
}

func checkSet(t *testing.T, ks *agentcard.KeySet, now time.Time, signer string, published ...string) {
	t.Helper()
	k, err := ks.SigningKey(now)
	if err != nil || k.KeyID != signer {
		t.Fatalf("at %s: signer %v, %v; want %s", now, k, err, signer)
	}
	var got []string
	for _, p := range ks.PublicKeys(now).Keys {
		got = append(got, p.KeyID)
	}
	if !slices.Equal(got, published) {
		t.Fatalf("at %s: published %v, want %v", now, got, published)
	}
}

func ptr[T any](v T) *T { return &v }
