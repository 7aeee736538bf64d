package agentcard

import "errors"

// Verification refusals. [Verifier.Verify] wraps one of these (several, through
// [errors.Join], when a card carries several signatures and none verifies), so
// callers branch with [errors.Is] and log the message for the detail.
var (
	// ErrUnsigned: the card carries no signature.
	ErrUnsigned = errors.New("agent card is not signed")
	// ErrAlgorithm: the signature's alg is "none", symmetric (HS*), not one the
	// verifier accepts, or does not fit the key it names.
	ErrAlgorithm = errors.New("signature algorithm refused")
	// ErrUnknownKey: no trusted key has the signature's kid.
	ErrUnknownKey = errors.New("signing key unknown")
	// ErrUntrustedJKU: the signature's jku is outside the trust policy, so it
	// is never fetched.
	ErrUntrustedJKU = errors.New("jku not trusted")
	// ErrBadSignature: the key is trusted but the signature does not match the
	// card; the card was changed after signing, or signed over another form.
	ErrBadSignature = errors.New("signature does not match card")
	// ErrMalformed: the card, a protected header or a signature cannot be decoded.
	ErrMalformed = errors.New("malformed agent card or signature")
	// ErrJWKSUnavailable: a trusted jku could not be fetched or read. Unlike
	// the refusals above it may pass on a retry.
	ErrJWKSUnavailable = errors.New("jwks unavailable")
)

// Key handling errors.
var (
	// ErrUnsupportedKey: the key is symmetric, public where a private key is
	// needed, or of a type or curve this package does not sign with.
	ErrUnsupportedKey = errors.New("unsupported key")
	// ErrNoSigningKey: no key of a [KeySet] is active at the given time.
	ErrNoSigningKey = errors.New("no active signing key")
)
