// Package auth authenticates an agent's callers: API keys (kept as SHA-256
// hashes, compared in constant time) and bearer JWTs checked against the
// JWKS of configured issuers, with go-jose.
//
// [Authenticator.Authenticate] turns a request into a [Principal] or a
// refusal. A request without credentials is anonymous only where the
// configuration allows it; a request with bad credentials is refused even
// then, so a typo never silently downgrades a caller to anonymous.
package auth
