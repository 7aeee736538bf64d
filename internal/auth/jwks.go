package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// ErrUnknownKey means no key of the issuer has the token's key id.
var ErrUnknownKey = errors.New("unknown key id")

// maxJWKSBytes bounds a fetched or read JWKS.
const maxJWKSBytes = 1 << 20

// StaticKeys is a KeySource over a fixed JWKS.
type StaticKeys struct{ set jose.JSONWebKeySet }

// ParseJWKS reads a JWKS document; private keys in it are refused, so a
// leaked private key file is never configured as a trust anchor by mistake.
func ParseJWKS(b []byte) (*StaticKeys, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("parse JWKS: %w", err)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, fmt.Errorf("parse JWKS: key %q is not a public key", k.KeyID)
		}
	}
	return &StaticKeys{set: set}, nil
}

// LoadJWKSFile reads a JWKS file.
func LoadJWKSFile(path string) (*StaticKeys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read JWKS: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("read JWKS %s: %w", path, err)
	}
	return ParseJWKS(b)
}

// Key implements [KeySource].
func (s *StaticKeys) Key(_ context.Context, kid string) (*jose.JSONWebKey, error) {
	if ks := s.set.Key(kid); len(ks) > 0 {
		return &ks[0], nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
}

// RemoteKeys is a KeySource that fetches a JWKS URL and caches it. An
// unknown key id refetches, at most once per MinRefresh, so a rotated key is
// picked up without letting callers hammer the issuer.
type RemoteKeys struct {
	URL        string
	Client     *http.Client
	TTL        time.Duration
	MinRefresh time.Duration

	mu      sync.Mutex
	keys    *StaticKeys
	fetched time.Time
}

// NewRemoteKeys returns a RemoteKeys for url with a 5 s timeout, a 5 min
// cache and refetches at most every 30 s.
func NewRemoteKeys(url string) *RemoteKeys {
	return &RemoteKeys{URL: url, Client: &http.Client{Timeout: 5 * time.Second}, TTL: 5 * time.Minute, MinRefresh: 30 * time.Second}
}

// Key implements [KeySource].
func (r *RemoteKeys) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	age := time.Since(r.fetched)
	if r.keys != nil && age < r.TTL {
		if k, err := r.keys.Key(ctx, kid); err == nil || age < r.MinRefresh {
			return k, err
		}
	}
	keys, err := r.fetch(ctx)
	if err != nil {
		if r.keys != nil { // the issuer is down: keep trusting what it published
			return r.keys.Key(ctx, kid)
		}
		return nil, err
	}
	r.keys, r.fetched = keys, time.Now()
	return keys.Key(ctx, kid)
}

func (r *RemoteKeys) fetch(ctx context.Context) (*StaticKeys, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", r.URL, err)
	}
	resp, err := r.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS %s: HTTP %d", r.URL, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS %s: %w", r.URL, err)
	}
	return ParseJWKS(b)
}
