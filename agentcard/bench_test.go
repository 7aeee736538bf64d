package agentcard_test

import (
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

func BenchmarkCanonical(b *testing.B) {
	card := testCard()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := agentcard.CanonicalPayload(card); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		b.Run(string(alg), func(b *testing.B) {
			key := mustKey(b, alg, "k")
			card := mustSign(b, testCard(), key, "")
			v := newVerifier(b, pinned(key))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(b.Context(), card); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
