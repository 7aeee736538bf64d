package agentcard

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxKeyFileBytes bounds what LoadKeyFile reads; a private JWK is well under 1 KiB.
const maxKeyFileBytes = 64 << 10

// GenerateKey makes a private signing key: Ed25519 for [jose.EdDSA], P-256 for
// [jose.ES256]. With an empty kid the key is named by its RFC 7638 thumbprint.
func GenerateKey(alg jose.SignatureAlgorithm, kid string) (*jose.JSONWebKey, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, fmt.Errorf("%w: cannot sign with %q (EdDSA or ES256)", ErrUnsupportedKey, alg)
	}
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", alg, err)
	}
	key := &jose.JSONWebKey{Key: priv, Algorithm: string(alg), Use: "sig", KeyID: kid}
	if kid == "" {
		if key.KeyID, err = thumbprint(key); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// WriteKeyFile writes a private key as a JWK to a new file with mode 0600. It
// never replaces a file: if path exists the error wraps [io/fs.ErrExist], so a
// second `keys generate` cannot destroy the key that signed published cards.
func WriteKeyFile(path string, key *jose.JSONWebKey) error {
	if _, err := signingAlgorithm(key); err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	b, err := json.MarshalIndent(key, "", "  ")
	if err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // a truncated key file would only fail later, at load
		return fmt.Errorf("write key %s: %w", path, err)
	}
	return nil
}

// LoadKeyFile reads a private signing key written by [WriteKeyFile] (or any
// private Ed25519 or P-256 JWK). Symmetric and public-only keys are refused
// with [ErrUnsupportedKey]. A key without alg gets the one its type implies; a
// key without kid gets its thumbprint.
func LoadKeyFile(path string) (*jose.JSONWebKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load key: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load key %s: %w", path, err)
	}
	if len(b) > maxKeyFileBytes {
		return nil, fmt.Errorf("load key %s: %w: larger than %d bytes", path, ErrUnsupportedKey, maxKeyFileBytes)
	}
	var key jose.JSONWebKey
	if err := json.Unmarshal(b, &key); err != nil {
		return nil, fmt.Errorf("load key %s: %w: %w", path, ErrUnsupportedKey, err)
	}
	alg, err := signingAlgorithm(&key)
	if err != nil {
		return nil, fmt.Errorf("load key %s: %w", path, err)
	}
	key.Algorithm = string(alg)
	if key.KeyID == "" {
		if key.KeyID, err = thumbprint(&key); err != nil {
			return nil, fmt.Errorf("load key %s: %w", path, err)
		}
	}
	return &key, nil
}

// signingAlgorithm is the algorithm key signs with, or why it cannot sign.
func signingAlgorithm(key *jose.JSONWebKey) (jose.SignatureAlgorithm, error) {
	if key == nil {
		return "", fmt.Errorf("%w: nil key", ErrUnsupportedKey)
	}
	var alg jose.SignatureAlgorithm
	switch k := key.Key.(type) {
	case ed25519.PrivateKey:
		alg = jose.EdDSA
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("%w: key %q: curve %s (P-256 only)", ErrUnsupportedKey, key.KeyID, k.Curve.Params().Name)
		}
		alg = jose.ES256
	case []byte:
		return "", fmt.Errorf("%w: key %q is symmetric", ErrUnsupportedKey, key.KeyID)
	case ed25519.PublicKey, *ecdsa.PublicKey:
		return "", fmt.Errorf("%w: key %q is public, signing needs the private key", ErrUnsupportedKey, key.KeyID)
	default:
		return "", fmt.Errorf("%w: key %q of type %T", ErrUnsupportedKey, key.KeyID, key.Key)
	}
	if !key.Valid() {
		return "", fmt.Errorf("%w: key %q is incomplete", ErrUnsupportedKey, key.KeyID)
	}
	if key.Algorithm != "" && key.Algorithm != string(alg) {
		return "", fmt.Errorf("%w: key %q says alg %s, its type signs %s", ErrUnsupportedKey, key.KeyID, key.Algorithm, alg)
	}
	if key.Use != "" && key.Use != "sig" {
		return "", fmt.Errorf("%w: key %q is for use %q", ErrUnsupportedKey, key.KeyID, key.Use)
	}
	return alg, nil
}

func thumbprint(key *jose.JSONWebKey) (string, error) {
	t, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("%w: thumbprint: %w", ErrUnsupportedKey, err)
	}
	return base64.RawURLEncoding.EncodeToString(t), nil
}

// A Key is one signing key of a [KeySet] with its lifetime.
type Key struct {
	// JWK is the private key, with its kid.
	JWK *jose.JSONWebKey
	// NotBefore is when the key may start signing. Publish a new key (add it
	// with a NotBefore ahead) before it signs, so peers that cached the JWKS
	// already know it.
	NotBefore time.Time
	// RetiredAt, when set, is when the key stops signing. It stays published
	// for the KeySet's keep period after that, for cards still cached.
	RetiredAt time.Time
}

// active reports whether k may sign at now.
func (k Key) active(now time.Time) bool {
	return !now.Before(k.NotBefore) && (k.RetiredAt.IsZero() || now.Before(k.RetiredAt))
}

// A KeySet holds an agent's signing keys through rotation. It is immutable
// and safe for concurrent use; rotate by building a new one.
type KeySet struct {
	keys []Key
	keep time.Duration
}

// NewKeySet checks keys (private, Ed25519 or P-256, distinct non-empty kids)
// and returns the set. keep is how long a retired key stays published after
// its RetiredAt; it should outlast the longest time a peer caches the card.
func NewKeySet(keep time.Duration, keys ...Key) (*KeySet, error) {
	if keep < 0 {
		return nil, fmt.Errorf("key set: negative keep %s", keep)
	}
	seen := make(map[string]bool, len(keys))
	var errs []error
	for i, k := range keys {
		if _, err := signingAlgorithm(k.JWK); err != nil {
			errs = append(errs, fmt.Errorf("key %d: %w", i, err))
			continue
		}
		switch {
		case k.JWK.KeyID == "":
			errs = append(errs, fmt.Errorf("key %d: %w: no kid", i, ErrUnsupportedKey))
		case seen[k.JWK.KeyID]:
			errs = append(errs, fmt.Errorf("key %d: kid %q used twice", i, k.JWK.KeyID))
		case !k.RetiredAt.IsZero() && k.RetiredAt.Before(k.NotBefore):
			errs = append(errs, fmt.Errorf("key %q: retired before its NotBefore", k.JWK.KeyID))
		}
		seen[k.JWK.KeyID] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	return &KeySet{keys: slices.Clone(keys), keep: keep}, nil
}

// SigningKey returns the active key with the latest NotBefore at now, or
// [ErrNoSigningKey].
func (s *KeySet) SigningKey(now time.Time) (*jose.JSONWebKey, error) {
	var best *Key
	for i, k := range s.keys {
		if k.active(now) && (best == nil || k.NotBefore.After(best.NotBefore)) {
			best = &s.keys[i]
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w at %s", ErrNoSigningKey, now.Format(time.RFC3339))
	}
	return best.JWK, nil
}

// PublicKeys returns the public part of every key not retired for longer than
// keep at now, including keys whose NotBefore is still ahead.
func (s *KeySet) PublicKeys(now time.Time) jose.JSONWebKeySet {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range s.keys {
		if !k.RetiredAt.IsZero() && !now.Before(k.RetiredAt.Add(s.keep)) {
			continue
		}
		pub := k.JWK.Public()
		pub.Use = "sig"
		set.Keys = append(set.Keys, pub)
	}
	return set
}

// JWKS returns [KeySet.PublicKeys] as JSON, to serve at the jku URL.
func (s *KeySet) JWKS(now time.Time) ([]byte, error) {
	b, err := json.Marshal(s.PublicKeys(now))
	if err != nil {
		return nil, fmt.Errorf("encode jwks: %w", err)
	}
	return b, nil
}
