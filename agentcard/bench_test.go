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

// BenchmarkSign measures Sign of a card with each algorithm: the canonical
// payload and the signature, as an agent does when it starts or reloads.
func BenchmarkSign(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		key := mustKey(b, alg, "k")
		card := testCard()
		b.Run(string(alg), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				signed, err := agentcard.Sign(card, key, "")
				if err != nil {
					b.Fatal(err)
				}
				if len(signed.Signatures) != 1 {
					b.Fatalf("%d signatures, want 1", len(signed.Signatures))
				}
			}
		})
	}
}

// BenchmarkVerify measures Verify of a card with a pinned key. "repeat" is
// the same card again on one Verifier (a directory refresh of an unchanged
// card: the signature check is remembered); "first" is a card the Verifier
// has not seen, with a new Verifier per call (its construction included), so
// every call does the signature arithmetic.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		key := mustKey(b, alg, "k")
		card := mustSign(b, testCard(), key, "")
		policy := pinned(key)
		b.Run(string(alg)+"/repeat", func(b *testing.B) {
			v := newVerifier(b, policy)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(b.Context(), card); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(alg)+"/first", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v := newVerifier(b, policy)
				if _, err := v.Verify(b.Context(), card); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
