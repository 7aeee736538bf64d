package push_test

import (
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

// testTimeout bounds every HTTP exchange of a test; none should come near it.
const testTimeout = 10 * time.Second

// t0 is the time the tests sign at and verify at.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// keySet makes a KeySet of one fresh key per kid, all active since before t0.
func keySet(t testing.TB, alg jose.SignatureAlgorithm, kids ...string) *agentcard.KeySet {
	t.Helper()
	var keys []agentcard.Key
	for _, kid := range kids {
		k, err := agentcard.GenerateKey(alg, kid)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, agentcard.Key{JWK: k, NotBefore: t0.Add(-time.Hour)})
	}
	ks, err := agentcard.NewKeySet(time.Hour, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}
