package agentcard

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	jose "github.com/go-jose/go-jose/v4"
)

// Sign returns a copy of card whose signatures are exactly one JWS made with
// key over [CanonicalPayload]. The protected header carries alg, kid, typ
// "JOSE" and, unless jku is empty, jku: the absolute URL where the key's
// JWKS is served. The copy shares every member but Signatures with card.
//
// key must be a private Ed25519 or P-256 key with a kid ([ErrUnsupportedKey]
// otherwise). Ed25519 signatures are deterministic; ES256 ones are not.
func Sign(card *a2a.AgentCard, key *jose.JSONWebKey, jku string) (*a2a.AgentCard, error) {
	alg, err := signingAlgorithm(key)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	if key.KeyID == "" {
		return nil, fmt.Errorf("sign card: %w: key has no kid", ErrUnsupportedKey)
	}
	if jku != "" {
		if u, err := url.Parse(jku); err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("sign card: jku %q is not an absolute http(s) URL", jku)
		}
	}
	payload, err := CanonicalPayload(card)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	opts := (&jose.SignerOptions{}).WithType("JOSE")
	if jku != "" {
		opts = opts.WithHeader("jku", jku)
	}
	// go-jose writes the kid of a JSONWebKey signing key into the protected header.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	compact, err := jws.DetachedCompactSerialize() // protected..signature
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	protected, signature, ok := strings.Cut(compact, "..")
	if !ok {
		return nil, fmt.Errorf("sign card: unexpected serialization %q", compact)
	}
	out := *card
	out.Signatures = []a2a.AgentCardSignature{{Protected: protected, Signature: signature}}
	return &out, nil
}
