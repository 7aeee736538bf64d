package agentcard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	jose "github.com/go-jose/go-jose/v4"
)

func TestTrustedPrefix(t *testing.T) {
	v, err := NewVerifier(TrustPolicy{JKUPrefixes: []string{"https://peer.example/keys/", "http://127.0.0.1:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{
		"https://peer.example/keys/jwks.json":       true,
		"https://PEER.example/keys/a/b.json":        true,
		"http://127.0.0.1:8080/anything":            true,
		"http://peer.example/keys/jwks.json":        false, // scheme
		"https://peer.example.evil/keys/jwks.json":  false,
		"https://peer.example:444/keys/jwks.json":   false,
		"https://peer.example/keysx/jwks.json":      false,
		"https://peer.example/keys/../admin":        false,
		"https://peer.example/keys/%2e%2e/admin":    false,
		"https://u:p@peer.example/keys/jwks.json":   false,
		"https://peer.example/keys/jwks.json#frag":  false,
		"http://127.0.0.1:8081/jwks.json":           false,
		"//peer.example/keys/jwks.json":             false,
		"https://peer.example/other/keys/jwks.json": false,
	}
	for jku, want := range tests {
		if got := v.trusted(jku); got != want {
			t.Errorf("trusted(%q) = %v, want %v", jku, got, want)
		}
	}
}

// TestJWKSRefetch drives the cache with a fake clock: a kid missing from a
// fresh JWKS is refused without a fetch, a minute later it triggers one, and
// a JWKS past its TTL is fetched again.
func TestJWKSRefetch(t *testing.T) {
	old, err := GenerateKey(jose.EdDSA, "old")
	if err != nil {
		t.Fatal(err)
	}
	next, err := GenerateKey(jose.EdDSA, "next")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	published := []jose.JSONWebKey{old.Public()}
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hits++
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: published})
	}))
	t.Cleanup(srv.Close)

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v, err := NewVerifier(TrustPolicy{JKUPrefixes: []string{srv.URL}}, WithJWKSCacheTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v.cfg.now = func() time.Time { return now }
	card := &a2a.AgentCard{Name: "peer", Description: "d"}
	verify := func(k *jose.JSONWebKey) error {
		signed, err := Sign(card, k, srv.URL+"/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(t.Context(), signed)
		return err
	}
	wantHits := func(n int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if hits != n {
			t.Fatalf("JWKS fetched %d times, want %d", hits, n)
		}
	}

	if err := verify(old); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	published = append(published, next.Public())
	mu.Unlock()
	if err := verify(next); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("new kid within the minute: %v", err)
	}
	wantHits(1)
	now = now.Add(refetchAfter)
	if err := verify(next); err != nil {
		t.Fatalf("new kid after a minute: %v", err)
	}
	wantHits(2)
	now = now.Add(time.Hour)
	if err := verify(old); err != nil {
		t.Fatal(err)
	}
	wantHits(3)
}

// TestVerifiedCacheFollowsKeys checks the cache of verified signatures: a
// card verified once is not checked again, yet the key is still looked up on
// every call, so a kid the JWKS drops, or serves with another key, no longer
// verifies the card it verified before.
func TestVerifiedCacheFollowsKeys(t *testing.T) {
	key, err := GenerateKey(jose.ES256, "k")
	if err != nil {
		t.Fatal(err)
	}
	other, err := GenerateKey(jose.ES256, "k") // same kid, another key
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	published := []jose.JSONWebKey{key.Public()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: published})
	}))
	t.Cleanup(srv.Close)
	publish := func(keys ...jose.JSONWebKey) {
		mu.Lock()
		defer mu.Unlock()
		published = keys
	}

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v, err := NewVerifier(TrustPolicy{JKUPrefixes: []string{srv.URL}}, WithJWKSCacheTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v.cfg.now = func() time.Time { return now }
	card, err := Sign(&a2a.AgentCard{Name: "peer", Description: "d"}, key, srv.URL+"/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	cached := func() int {
		v.mu.Lock()
		defer v.mu.Unlock()
		return len(v.verified)
	}

	for range 2 {
		if _, err := v.Verify(t.Context(), card); err != nil {
			t.Fatal(err)
		}
	}
	if n := cached(); n != 1 {
		t.Fatalf("%d verified signatures cached, want 1", n)
	}
	tampered := *card
	tampered.Description = "e"
	if _, err := v.Verify(t.Context(), &tampered); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered card with a cached signature: %v", err)
	}

	publish(other.Public())
	now = now.Add(2 * time.Hour)
	if _, err := v.Verify(t.Context(), card); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("kid now served with another key: %v", err)
	}
	publish()
	now = now.Add(2 * time.Hour)
	if _, err := v.Verify(t.Context(), card); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("kid no longer served: %v", err)
	}
	publish(key.Public())
	now = now.Add(2 * time.Hour)
	if _, err := v.Verify(t.Context(), card); err != nil {
		t.Fatalf("kid served again with its key: %v", err)
	}
}

func TestVerifiedCacheIsBounded(t *testing.T) {
	key, err := GenerateKey(jose.EdDSA, "k")
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(TrustPolicy{Keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.Public()}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxVerified + 10 {
		card, err := Sign(&a2a.AgentCard{Name: "peer", Description: strconv.Itoa(i)}, key, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(t.Context(), card); err != nil {
			t.Fatal(err)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if n := len(v.verified); n != maxVerified {
		t.Fatalf("%d verified signatures cached, want %d", n, maxVerified)
	}
}
