package webhook

import "errors"

// Refusals of [Verifier.Verify]. The error wraps exactly one of these, so
// callers branch with [errors.Is]; its message adds the detail, which is
// safe to log but meant for the webhook owner, not for the sender.
var (
	// ErrBadSignature: no signature header, not a JWT, an algorithm that is
	// not asymmetric, a typ other than "JWT", a signature that does not
	// verify, or signed claims that lack jti or task_id.
	ErrBadSignature = errors.New("bad push signature")
	// ErrUnknownKey: the agent's JWKS has no key with the JWT's kid.
	ErrUnknownKey = errors.New("push signing key unknown")
	// ErrWrongAudience: the JWT is for another webhook URL.
	ErrWrongAudience = errors.New("push signature for another audience")
	// ErrWrongIssuer: [WithIssuer] is set and the JWT's iss differs.
	ErrWrongIssuer = errors.New("push signature from another issuer")
	// ErrStale: iat is missing, older than the max age, or ahead of the
	// clock by more than the skew; or exp has passed.
	ErrStale = errors.New("push signature stale")
	// ErrBodyMismatch: the body is not the one the JWT's body_sha256 names.
	ErrBodyMismatch = errors.New("body does not match push signature")
	// ErrBadToken: [WithToken] is set and neither token header matches it.
	ErrBadToken = errors.New("bad notification token")
	// ErrReplay: a delivery with this jti has already been accepted.
	ErrReplay = errors.New("push delivery replayed")
	// ErrJWKSUnavailable: the agent's JWKS could not be fetched. Unlike the
	// refusals above, it may pass on a retry.
	ErrJWKSUnavailable = errors.New("agent jwks unavailable")
)

// refusals are the sentinels a Verify error wraps, for [publicReason].
var refusals = []error{
	ErrBadSignature, ErrUnknownKey, ErrWrongAudience, ErrWrongIssuer, ErrStale,
	ErrBodyMismatch, ErrBadToken, ErrReplay, ErrJWKSUnavailable,
}
