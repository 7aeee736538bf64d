package push

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/push/webhook"
)

// signatureLifetime is how long a delivery JWT is valid (its exp). A retry
// is signed again, so this only needs to cover one attempt.
const signatureLifetime = 5 * time.Minute

// A Signer signs deliveries with the agent's card signing keys, so a webhook
// owner checks them against the JWKS the agent already publishes, with a
// [webhook.Verifier]. It is safe for concurrent use.
type Signer struct {
	keys   *agentcard.KeySet
	issuer string
}

// NewSigner returns a Signer using the current key of keys. issuer, the
// "iss" claim, is the agent's card URL or base URL; empty leaves it out.
func NewSigner(keys *agentcard.KeySet, issuer string) *Signer {
	return &Signer{keys: keys, issuer: issuer}
}

// Sign returns the JWT for one delivery of body to the webhook URL aud. Its
// header has the alg and kid of the key signing at now and typ "JWT"; its
// claims are iss, aud, iat (now), exp (now+5m), jti (deliveryID and a random
// suffix: unique per attempt), delivery_id, task_id and body_sha256, the
// unpadded base64url SHA-256 of body. The error wraps
// [agentcard.ErrNoSigningKey] when no key is active at now.
func (s *Signer) Sign(aud, taskID, deliveryID string, body []byte, now time.Time) (string, error) {
	key, err := s.keys.SigningKey(now)
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	// go-jose writes the kid of a JSONWebKey signing key into the header.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: keyAlgorithm(key), Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	claims := jwt.Claims{
		Issuer:   s.issuer,
		Audience: jwt.Audience{aud},
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(signatureLifetime)),
		ID:       deliveryID + "#" + rand.Text(),
	}
	tok, err := jwt.Signed(signer).Claims(claims).Claims(webhook.Claims{TaskID: taskID, BodySHA256: webhook.BodyHash(body), DeliveryID: deliveryID}).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	return tok, nil
}

// keyAlgorithm is the alg key signs with. A KeySet holds only Ed25519 and
// P-256 keys, but does not require their alg member to be set.
func keyAlgorithm(key *jose.JSONWebKey) jose.SignatureAlgorithm {
	if key.Algorithm != "" {
		return jose.SignatureAlgorithm(key.Algorithm)
	}
	switch key.Key.(type) {
	case ed25519.PrivateKey:
		return jose.EdDSA
	case *ecdsa.PrivateKey:
		return jose.ES256
	}
	return "" // jose.NewSigner refuses it, and Sign returns that error
}
