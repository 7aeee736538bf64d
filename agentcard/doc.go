// Package agentcard signs and verifies A2A Agent Cards and manages the keys
// that sign them.
//
// A card signature is a JWS (RFC 7515) with a detached payload, carried in
// the card's "signatures" member as a2a.AgentCardSignature{Protected,
// Signature}. The payload is [CanonicalPayload]: the RFC 8785 (JCS) form of
// the card's A2A 1.0 members, without "signatures" and without empty values,
// the form the official Python and JS SDKs verify. The protected header holds
// alg, kid, typ "JOSE" and, when given, jku: the URL of the JWKS that
// publishes the key.
//
// # Publishing
//
// An agent keeps its private keys as JWK files ([GenerateKey],
// [WriteKeyFile], [LoadKeyFile]) and rotates them through a [KeySet]: the
// newest active key signs ([KeySet.SigningKey], then [Sign]), and every key
// that may still be in use by a cached card is published ([KeySet.JWKS]).
//
//	key, _ := ks.SigningKey(time.Now())
//	signed, err := agentcard.Sign(card, key, "https://agent.example/.well-known/jwks.json")
//
// # Verifying
//
// A [Verifier] accepts a card only when one of its signatures verifies with a
// key its [TrustPolicy] trusts: a pinned key, or a key fetched from a jku
// under a trusted URL prefix (size-limited, time-limited, cached). Everything
// else is refused with a sentinel error: [ErrUnsigned], [ErrAlgorithm],
// [ErrUnknownKey], [ErrUntrustedJKU], [ErrBadSignature], [ErrMalformed],
// or [ErrJWKSUnavailable] when a trusted JWKS cannot be read. A signature
// that verified is remembered, so verifying an unchanged card again skips the
// signature arithmetic; the key is still looked up and must still be trusted.
//
//	card, err := agentcard.ParseCard(body) // 1.0 card, 0.3 members beside it allowed
//	kid, err := verifier.Verify(ctx, card)
//
// Only EdDSA (Ed25519) and ES256 keys sign. Verification also accepts ES384
// and RS256 (2048-bit keys and up) from peers; never "none" nor HS*.
package agentcard
