package handoff

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// Security scheme names on the card.
const (
	schemeAPIKey = "apiKey"
	schemeBearer = "bearer"
)

// newAuthenticator builds the caller check from the config's auth section;
// log receives the failures of JWKS fetches.
func newAuthenticator(c *AuthConfig, log *slog.Logger) (*auth.Authenticator, error) {
	a := &auth.Authenticator{Anonymous: c.Anonymous, APIKeyHeader: c.APIKeyHeader}
	for _, k := range c.APIKeys {
		h, err := auth.ParseAPIKeyHash(k.SHA256)
		if err != nil {
			return nil, fmt.Errorf("api key %s: %w", k.Name, err)
		}
		a.APIKeys = append(a.APIKeys, auth.APIKey{Name: k.Name, Tenant: k.Tenant, SHA256: h})
	}
	for _, j := range c.JWTIssuers {
		var keys auth.KeySource
		if j.JWKSFile != "" {
			s, err := auth.LoadJWKSFile(j.JWKSFile)
			if err != nil {
				return nil, fmt.Errorf("issuer %s: %w", j.Issuer, err)
			}
			keys = s
		} else {
			rk := auth.NewRemoteKeys(j.JWKSURL)
			rk.Log = log.With(slog.String("issuer", j.Issuer))
			if j.JWKSMinRefresh != nil {
				rk.MinRefresh = j.JWKSMinRefresh.Duration
			}
			keys = rk
		}
		a.Issuers = append(a.Issuers, auth.Issuer{Issuer: j.Issuer, Audience: j.Audience, Keys: keys,
			Skew: j.ClockSkew.Duration, TenantClaim: j.TenantClaim})
	}
	return a, nil
}

// securitySchemes are the card's schemes and requirements for the config:
// any one of the configured credentials satisfies a request.
func securitySchemes(c *AuthConfig) (a2a.NamedSecuritySchemes, a2a.SecurityRequirementsOptions) {
	schemes := a2a.NamedSecuritySchemes{}
	var reqs a2a.SecurityRequirementsOptions
	if len(c.APIKeys) > 0 {
		schemes[schemeAPIKey] = a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: c.APIKeyHeader,
			Description: "An API key issued by the agent's operator."}
		reqs = append(reqs, a2a.SecurityRequirements{schemeAPIKey: {}})
	}
	if len(c.JWTIssuers) > 0 {
		schemes[schemeBearer] = a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT",
			Description: "A JWT from one of the agent's trusted issuers."}
		reqs = append(reqs, a2a.SecurityRequirements{schemeBearer: {}})
	}
	if len(schemes) == 0 {
		return nil, nil
	}
	if c.Anonymous { // an empty requirement: no credentials is acceptable too
		reqs = append(reqs, a2a.SecurityRequirements{})
	}
	return schemes, reqs
}

// extendedCard serves the extended card to authenticated callers only.
func extendedCard(card *a2a.AgentCard) func(context.Context) (*a2a.AgentCard, error) {
	return func(ctx context.Context) (*a2a.AgentCard, error) {
		if _, ok := auth.PrincipalFrom(ctx); !ok {
			return nil, a2a.NewError(a2a.ErrUnauthenticated, "the extended card is for authenticated callers")
		}
		return card, nil
	}
}
