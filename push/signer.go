package push

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

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

	// last is the jose signer of the key that signed last: making one per
	// delivery costs about as much as the signature.
	mu   sync.Mutex
	last struct {
		key    *jose.JSONWebKey
		signer jose.Signer
	}
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
	signer, err := s.signerOf(key)
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	// The claims are encoded once, as one object: jwt.Signed's builder
	// encodes each set, decodes it into a map and encodes the merged map,
	// which cost more than the signature.
	payload, err := json.Marshal(deliveryClaims{Issuer: s.issuer, Audience: aud, IssuedAt: now.Unix(), Expiry: now.Add(signatureLifetime).Unix(),
		ID: deliveryID + "#" + rand.Text(), Claims: webhook.Claims{TaskID: taskID, BodySHA256: webhook.BodyHash(body), DeliveryID: deliveryID}})
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("sign delivery %s: %w", deliveryID, err)
	}
	return tok, nil
}

// deliveryClaims are a delivery JWT's claims, registered and the
// delivery's, encoded as jwt.Claims encodes them (one audience is a string,
// times are seconds).
type deliveryClaims struct {
	Issuer   string `json:"iss,omitempty"`
	Audience string `json:"aud"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`
	ID       string `json:"jti"`
	webhook.Claims
}

// signerOf returns the jose signer of key, made once per key in a row (a
// jose.Signer is safe for concurrent use).
func (s *Signer) signerOf(key *jose.JSONWebKey) (jose.Signer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.key == key {
		return s.last.signer, nil
	}
	// go-jose writes the kid of a JSONWebKey signing key into the header.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: keyAlgorithm(key), Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	s.last.key, s.last.signer = key, signer
	return signer, nil
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
