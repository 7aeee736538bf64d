package agentcard

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	jose "github.com/go-jose/go-jose/v4"
)

// maxSignatures bounds the work one card can ask for: each signature may cost
// a JWKS fetch and up to 16 signature checks.
const maxSignatures = 8

// refetchAfter is how old a cached JWKS must be before a kid missing from it
// triggers a new fetch: new keys are picked up fast, yet cards naming made-up
// kids cannot make the verifier hammer a JWKS server.
const refetchAfter = time.Minute

// maxCachedJWKS bounds the JWKS cache; one trusted prefix admits many URLs.
const maxCachedJWKS = 256

// maxVerified bounds the cache of signatures already verified.
const maxVerified = 1024

// verifyAlgorithms are the algorithms a peer's card may be signed with.
var verifyAlgorithms = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256, jose.ES384, jose.RS256}

// A TrustPolicy says which keys may sign the cards a [Verifier] accepts. A
// key is trusted when its kid is pinned in Keys, or when the signature's jku
// lies under one of JKUPrefixes and the JWKS served there has the kid. The
// zero policy trusts nothing.
type TrustPolicy struct {
	// Keys are pinned public keys (private ones are reduced to their public
	// part), matched by kid whatever jku the signature names.
	Keys jose.JSONWebKeySet
	// JKUPrefixes are absolute http(s) URLs. A jku is trusted when it has
	// the same scheme and host (port included) as a prefix and its path
	// starts with the prefix's path; "https://peer.example/keys/" trusts
	// https://peer.example/keys/jwks.json. A jku with userinfo, a fragment,
	// or a "." or ".." path segment is never trusted.
	JKUPrefixes []string
}

// A Verifier checks card signatures against a [TrustPolicy]. It is safe for
// concurrent use and caches the JWKS it fetches.
type Verifier struct {
	cfg      config
	pinned   map[string]jose.JSONWebKey
	prefixes []*url.URL

	mu       sync.Mutex
	cache    map[string]*cachedJWKS
	verified map[verifiedSig]crypto.PublicKey
}

// verifiedSig names one signature check: a JWS (its protected header and
// signature) over a card's primary payload, by its SHA-256. The alternative
// payloads are a function of the primary one (they differ only in false
// capabilities the primary leaves out, and in escapes), so the primary
// payload determines the whole check.
type verifiedSig struct {
	payload              [sha256.Size]byte
	protected, signature string
}

// publicKey is what every public key of the crypto packages implements.
type publicKey interface {
	Equal(crypto.PublicKey) bool
}

type cachedJWKS struct {
	keys    map[string]jose.JSONWebKey
	fetched time.Time
}

// NewVerifier checks the policy (pinned keys public-able, supported and with
// distinct kids; prefixes absolute http(s) URLs) and returns a Verifier.
func NewVerifier(policy TrustPolicy, opts ...Option) (*Verifier, error) {
	v := &Verifier{cfg: newConfig(opts), pinned: map[string]jose.JSONWebKey{}, cache: map[string]*cachedJWKS{}, verified: map[verifiedSig]crypto.PublicKey{}}
	var errs []error
	for i, k := range policy.Keys.Keys {
		pub := k.Public()
		switch {
		case k.KeyID == "":
			errs = append(errs, fmt.Errorf("pinned key %d: no kid", i))
		case !pub.Valid() || !pub.IsPublic():
			errs = append(errs, fmt.Errorf("pinned key %q: %w: %T", k.KeyID, ErrUnsupportedKey, k.Key))
		case v.pinned[k.KeyID].Key != nil:
			errs = append(errs, fmt.Errorf("pinned key %q: kid used twice", k.KeyID))
		default:
			v.pinned[k.KeyID] = pub
		}
	}
	for _, p := range policy.JKUPrefixes {
		u, err := url.Parse(p)
		if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("jku prefix %q: not an absolute http(s) URL without userinfo, query or fragment", p))
			continue
		}
		if u.Path == "" {
			u.Path = "/"
		}
		v.prefixes = append(v.prefixes, u)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	return v, nil
}

// protectedHeader holds the members of a signature's protected header that
// decide trust. Unprotected header members are never read: nothing signs them.
type protectedHeader struct {
	Alg, Kid, JKU string
}

// Verify returns the kid of the first of card's signatures that verifies with
// a trusted key. When none does, the error wraps each signature's refusal
// (see the package errors), joined. A card with more than 8 signatures is
// refused as [ErrMalformed]. ctx bounds the JWKS fetches.
//
// A signature that verified once is not checked again while the same key
// (pinned, or served in the JWKS at its jku) is still trusted for its kid:
// the key is looked up on every call, only the signature arithmetic over
// identical bytes is remembered. A periodic refresh of an unchanged card
// then costs its canonical payload and a lookup.
func (v *Verifier) Verify(ctx context.Context, card *a2a.AgentCard) (string, error) {
	if card == nil || len(card.Signatures) == 0 {
		return "", fmt.Errorf("verify card: %w", ErrUnsigned)
	}
	if len(card.Signatures) > maxSignatures {
		return "", fmt.Errorf("verify card %q: %w: %d signatures, at most %d", card.Name, ErrMalformed, len(card.Signatures), maxSignatures)
	}
	primary, err := CanonicalPayload(card)
	if err != nil {
		return "", fmt.Errorf("verify card %q: %w", card.Name, err)
	}
	digest := sha256.Sum256(primary)
	var alts [][]byte // computed once, after a trusted key did not verify the primary payload
	var errs []error
	for i, sig := range card.Signatures {
		kid, err := v.verifyOne(ctx, sig, primary, digest, func() ([][]byte, error) {
			if alts == nil {
				a, err := altPayloads(card, primary)
				if err != nil {
					return nil, err
				}
				alts = a
			}
			return alts, nil
		})
		if err == nil {
			return kid, nil
		}
		errs = append(errs, fmt.Errorf("signature %d: %w", i, err))
	}
	return "", fmt.Errorf("verify card %q: %w", card.Name, errors.Join(errs...))
}

func (v *Verifier) verifyOne(ctx context.Context, sig a2a.AgentCardSignature, primary []byte, digest [sha256.Size]byte, alts func() ([][]byte, error)) (string, error) {
	h, err := parseProtected(sig.Protected)
	if err != nil {
		return "", err
	}
	key, err := v.key(ctx, h)
	if err != nil {
		return "", err
	}
	if err := fits(jose.SignatureAlgorithm(h.Alg), key); err != nil {
		return "", err
	}
	id := verifiedSig{payload: digest, protected: sig.Protected, signature: sig.Signature}
	if v.verifiedBy(id, key) {
		return h.Kid, nil
	}
	jws, err := jose.ParseDetached(sig.Protected+".."+sig.Signature, primary, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(h.Alg)})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if jws.DetachedVerify(primary, key) == nil {
		v.remember(id, key)
		return h.Kid, nil
	}
	more, err := alts()
	if err != nil {
		return "", err
	}
	for _, p := range more {
		if jws.DetachedVerify(p, key) == nil {
			v.remember(id, key)
			return h.Kid, nil
		}
	}
	return "", fmt.Errorf("%w (kid %q)", ErrBadSignature, h.Kid)
}

// verifiedBy reports whether key itself verified id before.
func (v *Verifier) verifiedBy(id verifiedSig, key jose.JSONWebKey) bool {
	v.mu.Lock()
	prev, ok := v.verified[id]
	v.mu.Unlock()
	if !ok {
		return false
	}
	pk, ok := prev.(publicKey)
	return ok && pk.Equal(key.Key)
}

// remember records that key verified id. A full cache forgets an arbitrary
// entry: the cost of forgetting is one signature check.
func (v *Verifier) remember(id verifiedSig, key jose.JSONWebKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.verified[id]; !ok && len(v.verified) >= maxVerified {
		for old := range v.verified {
			delete(v.verified, old)
			break
		}
	}
	v.verified[id] = key.Key
}

func parseProtected(protected string) (protectedHeader, error) {
	var h protectedHeader
	b, err := base64.RawURLEncoding.DecodeString(protected)
	if err != nil {
		return h, fmt.Errorf("%w: protected header: %w", ErrMalformed, err)
	}
	// A map, not a struct: encoding/json matches struct fields case-insensitively,
	// go-jose reads the exact names, and both must see the same header.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return h, fmt.Errorf("%w: protected header: %w", ErrMalformed, err)
	}
	for name, dst := range map[string]*string{"alg": &h.Alg, "kid": &h.Kid, "jku": &h.JKU} {
		if raw, ok := m[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return h, fmt.Errorf("%w: protected header %s: %w", ErrMalformed, name, err)
			}
		}
	}
	switch alg := jose.SignatureAlgorithm(h.Alg); {
	case h.Alg == "":
		return h, fmt.Errorf("%w: protected header has no alg", ErrMalformed)
	case strings.EqualFold(h.Alg, "none"), strings.HasPrefix(strings.ToUpper(h.Alg), "HS"):
		return h, fmt.Errorf("%w: %q", ErrAlgorithm, h.Alg)
	case !slices.Contains(verifyAlgorithms, alg):
		return h, fmt.Errorf("%w: %q is not one of %v", ErrAlgorithm, h.Alg, verifyAlgorithms)
	}
	if h.Kid == "" {
		return h, fmt.Errorf("%w: protected header has no kid", ErrMalformed)
	}
	if crit, ok := m["crit"]; ok {
		return h, fmt.Errorf("%w: critical header parameters %s not understood", ErrMalformed, crit)
	}
	return h, nil
}

// fits refuses a key that alg cannot verify with, so a header cannot steer a
// key into another algorithm, and RSA keys under 2048 bits.
func fits(alg jose.SignatureAlgorithm, key jose.JSONWebKey) error {
	if key.Algorithm != "" && key.Algorithm != string(alg) {
		return fmt.Errorf("%w: %s, key %q is for %s", ErrAlgorithm, alg, key.KeyID, key.Algorithm)
	}
	ok := false
	switch k := key.Key.(type) {
	case ed25519.PublicKey:
		ok = alg == jose.EdDSA
	case *ecdsa.PublicKey:
		ok = (alg == jose.ES256 && k.Curve == elliptic.P256()) || (alg == jose.ES384 && k.Curve == elliptic.P384())
	case *rsa.PublicKey:
		ok = alg == jose.RS256 && k.N.BitLen() >= 2048
	}
	if !ok {
		return fmt.Errorf("%w: %s does not fit key %q (%T)", ErrAlgorithm, alg, key.KeyID, key.Key)
	}
	return nil
}

// key finds the trusted key the header names.
func (v *Verifier) key(ctx context.Context, h protectedHeader) (jose.JSONWebKey, error) {
	if k, ok := v.pinned[h.Kid]; ok {
		return k, nil
	}
	if h.JKU == "" {
		return jose.JSONWebKey{}, fmt.Errorf("%w: kid %q is not pinned and the signature names no jku", ErrUnknownKey, h.Kid)
	}
	if !v.trusted(h.JKU) {
		return jose.JSONWebKey{}, fmt.Errorf("%w: %q", ErrUntrustedJKU, h.JKU)
	}
	return v.jwksKey(ctx, h.JKU, h.Kid)
}

func (v *Verifier) trusted(jku string) bool {
	u, err := url.Parse(jku)
	if err != nil || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	for _, p := range v.prefixes {
		if u.Scheme == p.Scheme && strings.EqualFold(u.Host, p.Host) && strings.HasPrefix(u.Path, p.Path) {
			return true
		}
	}
	return false
}

// jwksKey returns kid from the JWKS at jku, fetching it when not cached, stale,
// or a minute old and missing kid.
func (v *Verifier) jwksKey(ctx context.Context, jku, kid string) (jose.JSONWebKey, error) {
	now := v.cfg.now()
	v.mu.Lock()
	c := v.cache[jku]
	v.mu.Unlock()
	if c != nil && now.Sub(c.fetched) < v.cfg.ttl {
		if k, ok := c.keys[kid]; ok {
			return k, nil
		}
		if now.Sub(c.fetched) < refetchAfter {
			return jose.JSONWebKey{}, fmt.Errorf("%w: kid %q not in %s", ErrUnknownKey, kid, jku)
		}
	}
	keys, err := v.fetch(ctx, jku)
	if err != nil {
		return jose.JSONWebKey{}, err
	}
	v.store(jku, &cachedJWKS{keys: keys, fetched: now})
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return jose.JSONWebKey{}, fmt.Errorf("%w: kid %q not in %s", ErrUnknownKey, kid, jku)
}

func (v *Verifier) store(jku string, c *cachedJWKS) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.cache[jku]; !ok && len(v.cache) >= maxCachedJWKS {
		var oldest string
		for u, e := range v.cache {
			if oldest == "" || e.fetched.Before(v.cache[oldest].fetched) {
				oldest = u
			}
		}
		delete(v.cache, oldest)
	}
	v.cache[jku] = c
}

// fetch reads the JWKS at jku. Entries that are private, symmetric, invalid
// or of a type this package cannot verify with are skipped, not fatal: a
// JWKS may publish keys for other uses.
func (v *Verifier) fetch(ctx context.Context, jku string) (map[string]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jku, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrJWKSUnavailable, jku, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.cfg.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJWKSUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: status %s", ErrJWKSUnavailable, jku, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, v.cfg.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrJWKSUnavailable, jku, err)
	}
	if int64(len(body)) > v.cfg.maxBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrJWKSUnavailable, jku, v.cfg.maxBytes)
	}
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrJWKSUnavailable, jku, err)
	}
	keys := make(map[string]jose.JSONWebKey, len(raw.Keys))
	for _, r := range raw.Keys {
		var private struct {
			D, P, Q, DP, DQ, QI, K, Priv json.RawMessage
		}
		if json.Unmarshal(r, &private) != nil || private.D != nil || private.P != nil || private.Q != nil ||
			private.DP != nil || private.DQ != nil || private.QI != nil || private.K != nil || private.Priv != nil {
			continue // never parse secrets a careless server publishes
		}
		var k jose.JSONWebKey
		if k.UnmarshalJSON(r) != nil || k.KeyID == "" || !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue
		}
		if _, dup := keys[k.KeyID]; !dup { // the first of a reused kid wins
			keys[k.KeyID] = k
		}
	}
	return keys, nil
}
