package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

// t0 is the time the tests sign at and verify at.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func clock(t time.Time) func() time.Time { return func() time.Time { return t } }

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

// serveJWKS publishes the public keys of ks as an agent does, and counts the
// fetches.
func serveJWKS(t testing.TB, ks *agentcard.KeySet) (url string, fetches *atomic.Int32) {
	t.Helper()
	b, err := ks.JWKS(t0)
	if err != nil {
		t.Fatal(err)
	}
	fetches = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/jwks.json", fetches
}
