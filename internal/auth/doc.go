// Package auth authenticates an agent's callers: API keys (kept as SHA-256
// hashes, compared in constant time) and bearer JWTs checked against the
// JWKS of configured issuers, with go-jose.
//
// [Authenticator.Authenticate] turns a request into a [Principal] or a
// refusal. A request without credentials is anonymous only where the
// configuration allows it; a request with bad credentials is refused even
// then, so a typo never silently downgrades a caller to anonymous, and so is
// a request whose credentials are not all good (a valid API key beside a
// bad bearer token) or name two callers.
//
// Authentication reads headers only, never the body. [RemoteKeys] serves
// cached keys at once and fetches an issuer's JWKS in the background, one
// fetch at a time and at most once per MinRefresh, so tokens with made-up
// key ids or a slow issuer cost known callers nothing.
package auth
