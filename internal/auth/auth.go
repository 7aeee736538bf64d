package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// DefaultAPIKeyHeader is the header API keys travel in.
const DefaultAPIKeyHeader = "X-API-Key"

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the caller: the API key's name, or the JWT issuer and subject.
	Name string
	// Tenant is the tenant the credential is bound to, if any.
	Tenant string
	// Method is "api_key" or "jwt".
	Method string
}

// APIKey is one accepted key, known only by its SHA-256.
type APIKey struct {
	// Name identifies the caller the key authenticates; it becomes the [Principal]'s Name.
	Name string
	// Tenant is the tenant the key is bound to, if any.
	Tenant string
	// SHA256 is the key's SHA-256 ([ParseAPIKeyHash] reads its hex form).
	SHA256 [32]byte
}

// HashAPIKey returns the hex SHA-256 under which a key is configured.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// ParseAPIKeyHash reads a hex SHA-256 as written by [HashAPIKey].
func ParseAPIKeyHash(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("not a hex SHA-256 (64 hex digits)")
	}
	copy(h[:], b)
	return h, nil
}

// KeySource finds an issuer's public key by key id.
type KeySource interface {
	Key(ctx context.Context, kid string) (*jose.JSONWebKey, error)
}

// Issuer is one trusted JWT issuer.
type Issuer struct {
	// Issuer is the required "iss" claim.
	Issuer string
	// Audience must appear in the "aud" claim.
	Audience string
	// Keys holds the issuer's public keys.
	Keys KeySource
	// Skew is the clock skew allowed on exp, nbf and iat.
	Skew time.Duration
	// TenantClaim, when set, names the claim holding the caller's tenant.
	TenantClaim string
}

// Authenticator checks requests. Its fields are set once, before use.
type Authenticator struct {
	// Anonymous lets requests without credentials through as anonymous.
	Anonymous bool
	// APIKeyHeader is the API key header; empty means DefaultAPIKeyHeader.
	APIKeyHeader string
	// APIKeys are the accepted API keys.
	APIKeys []APIKey
	// Issuers are the trusted JWT issuers; a bearer token is checked against the one its
	// "iss" claim names.
	Issuers []Issuer
	// Now replaces time.Now, for tests.
	Now func() time.Time
}

// algorithms are the JWT signature algorithms accepted: asymmetric only, so a
// public JWKS can never be used as an HMAC secret.
var algorithms = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256, jose.ES384, jose.RS256, jose.PS256}

// Authenticate returns the request's principal, nil for an allowed
// anonymous request, or an error wrapping ErrNoCredentials or ErrBadCredentials.
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	header := a.APIKeyHeader
	if header == "" {
		header = DefaultAPIKeyHeader
	}
	key := r.Header.Get(header)
	authz := r.Header.Get("Authorization")
	if key == "" && authz == "" {
		if a.Anonymous {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: send an API key in %s or a bearer token", ErrNoCredentials, header)
	}
	// Every credential sent is checked: a bad one is never ignored because
	// another one is good, and two good ones name two callers.
	var fromKey, fromToken *Principal
	if key != "" {
		p, err := a.apiKey(key)
		if err != nil {
			return nil, err
		}
		fromKey = p
	}
	if authz != "" {
		scheme, token, ok := strings.Cut(authz, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return nil, fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", ErrBadCredentials)
		}
		p, err := a.bearer(r.Context(), strings.TrimSpace(token))
		if err != nil {
			return nil, err
		}
		fromToken = p
	}
	if fromKey != nil && fromToken != nil {
		return nil, fmt.Errorf("%w: send one credential, an API key in %s or a bearer token, not both", ErrBadCredentials, header)
	}
	if fromKey != nil {
		return fromKey, nil
	}
	return fromToken, nil
}

func (a *Authenticator) apiKey(key string) (*Principal, error) {
	sum := sha256.Sum256([]byte(key))
	var found *APIKey
	for i := range a.APIKeys { // every key is compared: the time does not tell which matched
		if subtle.ConstantTimeCompare(sum[:], a.APIKeys[i].SHA256[:]) == 1 {
			found = &a.APIKeys[i]
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: unknown API key", ErrBadCredentials)
	}
	return &Principal{Name: "key:" + found.Name, Tenant: found.Tenant, Method: "api_key"}, nil
}

func (a *Authenticator) bearer(ctx context.Context, raw string) (*Principal, error) {
	tok, err := jwt.ParseSigned(raw, algorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: the bearer token is not a JWT signed with an accepted algorithm", ErrBadCredentials)
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, fmt.Errorf("%w: the bearer token's claims do not decode", ErrBadCredentials)
	}
	var iss *Issuer
	for i := range a.Issuers {
		if a.Issuers[i].Issuer == unverified.Issuer {
			iss = &a.Issuers[i]
		}
	}
	if iss == nil {
		return nil, fmt.Errorf("%w: the token's issuer is not trusted", ErrBadCredentials)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return nil, fmt.Errorf("%w: the token names no key id (kid)", ErrBadCredentials)
	}
	key, err := iss.Keys.Key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCredentials, err)
	}
	var claims jwt.Claims
	custom := map[string]any{}
	if err := tok.Claims(key.Key, &claims, &custom); err != nil {
		return nil, fmt.Errorf("%w: the token's signature does not verify", ErrBadCredentials)
	}
	if claims.Expiry == nil {
		return nil, fmt.Errorf("%w: the token has no expiry (exp)", ErrBadCredentials)
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: iss.Issuer, AnyAudience: jwt.Audience{iss.Audience}, Time: now()}, iss.Skew)
	switch {
	case errors.Is(err, jwt.ErrExpired):
		return nil, fmt.Errorf("%w: the token has expired", ErrBadCredentials)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, fmt.Errorf("%w: the token is not for this agent (aud)", ErrBadCredentials)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrBadCredentials, err)
	}
	if claims.Subject == "" {
		return nil, fmt.Errorf("%w: the token has no subject (sub)", ErrBadCredentials)
	}
	p := &Principal{Name: "jwt:" + iss.Issuer + "#" + claims.Subject, Method: "jwt"}
	if iss.TenantClaim != "" {
		p.Tenant, _ = custom[iss.TenantClaim].(string)
	}
	return p, nil
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal stored, if any.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}
