package auth

import "errors"

// Errors returned by [Authenticator.Authenticate]; the wrapped message says
// what was wrong and is safe to show the caller.
var (
	// ErrNoCredentials means the request carried none and anonymous access is off.
	ErrNoCredentials = errors.New("authentication required")
	// ErrBadCredentials means the request carried credentials that did not verify.
	ErrBadCredentials = errors.New("invalid credentials")
)

// ErrUnknownKey means no key of the issuer has the token's key id.
var ErrUnknownKey = errors.New("unknown key id")

// ErrKeysUnavailable is wrapped, beside ErrUnknownKey, when a key id is not
// known because the issuer's keys could not be fetched (yet): the issuer is
// down or slow, not the key made up.
var ErrKeysUnavailable = errors.New("issuer keys unavailable")
