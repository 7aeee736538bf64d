package agentcard_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

// FuzzVerify feeds arbitrary card JSON (signatures included) to ParseCard and
// Verify. Nothing may panic, and a card that verifies must verify again, with
// the same kid, after it is encoded and parsed back.
func FuzzVerify(f *testing.F) {
	key := vectorKey(f)
	signed := mustSign(f, testCard(), key, "")
	b, err := json.Marshal(signed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	es := mustSign(f, testCard(), mustKey(f, jose.ES256, "es"), "https://x.example/jwks.json")
	if b, err := json.Marshal(es); err == nil {
		f.Add(b)
	}
	names, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"signatures":[{"protected":"eyJhbGciOiJub25lIn0","signature":""}]}`))
	f.Add([]byte(`{"url":"https://a.example","preferredTransport":"JSONRPC","protocolVersion":"0.3.0","security":[{"b":["r"]}]}`))

	v := newVerifier(f, pinned(key))
	f.Fuzz(func(t *testing.T, data []byte) {
		card, err := agentcard.ParseCard(data)
		if err != nil {
			return
		}
		agentcard.CanonicalPayload(card) //nolint:errcheck // must not panic, may fail
		kid, err := v.Verify(t.Context(), card)
		if err != nil {
			return
		}
		again, err := json.Marshal(card)
		if err != nil {
			t.Fatalf("verified card does not encode: %v", err)
		}
		back, err := agentcard.ParseCard(again)
		if err != nil {
			t.Fatalf("verified card does not parse back: %v\n%s", err, again)
		}
		if kid2, err := v.Verify(t.Context(), back); err != nil || kid2 != kid {
			t.Fatalf("re-encoded card: Verify = %q, %v; first %q\n%s", kid2, err, kid, again)
		}
	})
}
