package tasks

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// MinSecretBytes is the least key material [NewSealer] takes from each secret.
const MinSecretBytes = 32

// sealedPrefix starts every sealed value; the key id and the sealed bytes
// follow: "sealed:v1:<key id>:<base64 of nonce and ciphertext>".
const sealedPrefix = "sealed:v1:"

// A Sealer encrypts the secrets of push configs (the token, the
// credentials of their authentication, and a URL with userinfo, a query or
// a fragment) before a store keeps them, with
// AES-256-GCM under keys derived by HKDF-SHA256 from secrets the agent is
// configured with, so neither the bbolt file nor Redis holds them in clear.
// Each sealed value is bound to its task, config and field: copied into
// another config it does not open.
//
// The first secret seals; every one given opens. Rotation: put the new
// secret first and keep the old one after it until every config sealed
// under it was replaced or deleted; a value sealed under a secret no longer
// given fails with [ErrUnsealable]. Values stored in clear before sealing was
// on are read as they are and sealed when their config is next stored.
//
// A sealed URL is stored as its masked form ([MaskedURL]), then "#" and the
// sealed value: a listing that cannot open it ([ListingSealer]) still shows
// where the config delivers.
type Sealer struct {
	sealID string
	aeads  map[string]cipher.AEAD // by key id
	// listing: open nothing, show sealed values masked (see ListingSealer).
	listing bool
}

// NewSealer derives one key from each secret (at least [MinSecretBytes]
// each); the first seals. Every replica of an agent must be given the same
// secrets.
func NewSealer(secrets ...[]byte) (*Sealer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("new sealer: no secret")
	}
	s := &Sealer{aeads: make(map[string]cipher.AEAD, len(secrets))}
	for i, secret := range secrets {
		if len(secret) < MinSecretBytes {
			return nil, fmt.Errorf("new sealer: secret %d has %d bytes, under the minimum of %d", i, len(secret), MinSecretBytes)
		}
		key, err := hkdf.Key(sha256.New, secret, nil, "handoff push config secrets v1", 32)
		if err != nil {
			return nil, fmt.Errorf("new sealer: derive key %d: %w", i, err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("new sealer: key %d: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("new sealer: key %d: %w", i, err)
		}
		// The id names the key without revealing it: a hash of the key, not of the secret.
		sum := sha256.Sum256(key)
		id := hex.EncodeToString(sum[:4])
		s.aeads[id] = aead
		if i == 0 {
			s.sealID = id
		}
	}
	return s, nil
}

// additional binds a sealed value to where it belongs.
func additional(cfg *a2a.PushConfig, field string) []byte {
	return []byte(string(cfg.TaskID) + "\x00" + cfg.ID + "\x00" + field)
}

func (s *Sealer) sealValue(cfg *a2a.PushConfig, field, v string) (string, error) {
	if v == "" {
		return "", nil
	}
	aead := s.aeads[s.sealID]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(v)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal push %s: %w", field, err)
	}
	out := aead.Seal(nonce, nonce, []byte(v), additional(cfg, field))
	return sealedPrefix + s.sealID + ":" + base64.RawStdEncoding.EncodeToString(out), nil
}

func (s *Sealer) openValue(cfg *a2a.PushConfig, field, v string) (string, error) {
	rest, sealed := strings.CutPrefix(v, sealedPrefix)
	if !sealed {
		return v, nil // stored before sealing was on
	}
	if s != nil && s.listing {
		return maskedSecret, nil
	}
	if s == nil {
		return "", fmt.Errorf("push %s of config %s: %w: the store has no sealing key", field, cfg.ID, ErrUnsealable)
	}
	id, enc, ok := strings.Cut(rest, ":")
	aead := s.aeads[id]
	if !ok || aead == nil {
		return "", fmt.Errorf("push %s of config %s: %w: sealed under key %q, not configured", field, cfg.ID, ErrUnsealable, id)
	}
	raw, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", fmt.Errorf("push %s of config %s: %w: not a sealed value", field, cfg.ID, ErrUnsealable)
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], additional(cfg, field))
	if err != nil {
		return "", fmt.Errorf("push %s of config %s: %w: %w", field, cfg.ID, ErrUnsealable, err)
	}
	return string(plain), nil
}

// maskedSecret stands for a sealed token or credential a listing shows.
const maskedSecret = "****"

// secretURL reports whether a push URL may hold a secret (userinfo, a
// query, a fragment), or does not parse: such a URL is sealed. A URL
// holding "#" is always sealed, so that a stored one holds only the "#"
// before a sealed value.
func secretURL(raw string) bool {
	u, err := url.Parse(raw)
	return err != nil || u.User != nil || u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#")
}

// sealURL is the stored form of a URL that holds a secret: its masked form,
// "#", the sealed URL.
func (s *Sealer) sealURL(cfg *a2a.PushConfig) (string, error) {
	if !secretURL(cfg.URL) {
		return cfg.URL, nil
	}
	v, err := s.sealValue(cfg, "url", cfg.URL)
	if err != nil {
		return "", err
	}
	return MaskedURL(cfg.URL) + "#" + v, nil
}

// openURL gives back the URL a stored one was sealed from; a listing gets
// its masked form.
func (s *Sealer) openURL(cfg *a2a.PushConfig) (string, error) {
	shown, sealed, ok := strings.Cut(cfg.URL, "#"+sealedPrefix)
	if !ok {
		return cfg.URL, nil
	}
	if s != nil && s.listing {
		return shown, nil
	}
	return s.openValue(cfg, "url", sealedPrefix+sealed)
}

// MaskedURL is a push URL as it may be shown: userinfo and the query, which
// may carry credentials, are replaced by "***", the fragment (never sent)
// is dropped, and a URL without them is returned as it is. A URL that does
// not parse is shown as "(unparsable URL)".
func MaskedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	user, query := u.User != nil, u.RawQuery != "" || u.ForceQuery
	if !user && !query && !strings.Contains(raw, "#") {
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	if user {
		// A placeholder user keeps the authority's "//" even with no host
		// ("//p@/x" is not the path "/x"); url escapes "*", hence the swap.
		u.User = url.User("u")
	}
	out := u.String()
	if user {
		out = strings.Replace(out, "//u@", "//***@", 1)
	}
	if query {
		out += "?***"
	}
	return out
}

// Seal returns a copy of cfg with its secrets sealed, or cfg itself when s
// is nil (no sealing) or cfg holds no secret. A store calls it before it
// keeps a push config.
func (s *Sealer) Seal(cfg *a2a.PushConfig) (*a2a.PushConfig, error) {
	if s == nil || cfg == nil || (cfg.Token == "" && (cfg.Auth == nil || cfg.Auth.Credentials == "") && !secretURL(cfg.URL)) {
		return cfg, nil
	}
	if s.listing {
		return nil, errors.New("seal push config: the store was opened only to list")
	}
	out := *cfg
	var err error
	if out.Token, err = s.sealValue(cfg, "token", cfg.Token); err != nil {
		return nil, err
	}
	if out.URL, err = s.sealURL(cfg); err != nil {
		return nil, err
	}
	if cfg.Auth != nil {
		auth := *cfg.Auth
		if auth.Credentials, err = s.sealValue(cfg, "credentials", auth.Credentials); err != nil {
			return nil, err
		}
		out.Auth = &auth
	}
	return &out, nil
}

// Open returns a copy of a stored cfg with its secrets opened. A nil s
// opens nothing, and refuses a sealed value with [ErrUnsealable]. A store
// calls it on every push config it reads back.
func (s *Sealer) Open(cfg *a2a.PushConfig) (*a2a.PushConfig, error) {
	if cfg == nil || (!strings.HasPrefix(cfg.Token, sealedPrefix) && (cfg.Auth == nil || !strings.HasPrefix(cfg.Auth.Credentials, sealedPrefix)) &&
		!strings.Contains(cfg.URL, "#"+sealedPrefix)) {
		return cfg, nil
	}
	out := *cfg
	var err error
	if out.Token, err = s.openValue(cfg, "token", cfg.Token); err != nil {
		return nil, err
	}
	if out.URL, err = s.openURL(cfg); err != nil {
		return nil, err
	}
	if cfg.Auth != nil {
		auth := *cfg.Auth
		if auth.Credentials, err = s.openValue(cfg, "credentials", auth.Credentials); err != nil {
			return nil, err
		}
		out.Auth = &auth
	}
	return &out, nil
}

// ListingSealer returns a Sealer for a store opened only to list its push
// configs without their keys (the push status of a stopped agent): it opens
// nothing and shows sealed secrets masked, a sealed URL as its masked form,
// and it refuses to seal, so storing a config with a secret fails. A store
// given it must not deliver.
func ListingSealer() *Sealer { return &Sealer{listing: true} }
