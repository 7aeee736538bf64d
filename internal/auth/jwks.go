package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

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
	return s.lookup(kid)
}

// lookup is Key on a set that may be nil (not fetched yet).
func (s *StaticKeys) lookup(kid string) (*jose.JSONWebKey, error) {
	if s != nil {
		if ks := s.set.Key(kid); len(ks) > 0 {
			return &ks[0], nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKey, kid)
}

// RemoteKeys is a KeySource that fetches a JWKS URL and caches it.
//
// A caller never waits for a fetch when its key id is cached, even past the
// TTL: the cached key answers and a refresh starts in the background. A key
// id not cached starts a fetch (or joins the one running: one fetch at a
// time) and waits for it, up to its own context; fetches start at most once
// per MinRefresh after the last one ended, whether it succeeded or failed,
// so a flood of tokens with made-up key ids, or an issuer that is down or
// slow, costs the issuer one request per MinRefresh and the callers no
// wait beyond the fetch already running.
type RemoteKeys struct {
	// URL is the issuer's JWKS.
	URL string
	// Client makes the fetches; its Timeout bounds each one.
	Client *http.Client
	// TTL is how long a fetched JWKS is used before it is refreshed.
	TTL time.Duration
	// MinRefresh is the least time between the end of one fetch and the
	// start of the next.
	MinRefresh time.Duration
	// Log, when set, receives a warning for each failed fetch.
	Log *slog.Logger

	mu       sync.Mutex
	keys     *StaticKeys
	fetched  time.Time     // when keys were fetched
	ended    time.Time     // when the last fetch ended, successful or not
	failed   bool          // the last fetch failed
	inflight chan struct{} // closed when the running fetch ends; nil when none runs
}

// NewRemoteKeys returns a RemoteKeys for url with a 5 s fetch timeout, a
// 5 min cache, and fetches at most every 30 s.
func NewRemoteKeys(url string) *RemoteKeys {
	return &RemoteKeys{URL: url, Client: &http.Client{Timeout: 5 * time.Second}, TTL: 5 * time.Minute, MinRefresh: 30 * time.Second}
}

// Key implements [KeySource]. It waits only for a key id it does not hold,
// and only for the fetch that may bring it.
func (r *RemoteKeys) Key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	r.mu.Lock()
	if r.keys != nil {
		if k, err := r.keys.Key(ctx, kid); err == nil {
			if time.Since(r.fetched) >= r.TTL {
				r.startLocked()
			}
			r.mu.Unlock()
			return k, nil
		}
	}
	wait := r.startLocked()
	r.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w %q: %w: still being fetched: %w", ErrUnknownKey, kid, ErrKeysUnavailable, ctx.Err())
		}
	}
	r.mu.Lock()
	keys, failed := r.keys, r.failed
	r.mu.Unlock()
	if keys == nil || failed {
		if k, err := keys.lookup(kid); err == nil {
			return k, nil // the issuer is down: what it published is still trusted
		}
		return nil, fmt.Errorf("%w %q: %w: the last fetch failed", ErrUnknownKey, kid, ErrKeysUnavailable)
	}
	return keys.Key(ctx, kid)
}

// startLocked starts a fetch unless one runs or the last one ended less
// than MinRefresh ago, and returns what to wait on: the running fetch, or
// nil when there is none to wait for.
func (r *RemoteKeys) startLocked() <-chan struct{} {
	if r.inflight != nil {
		return r.inflight
	}
	if !r.ended.IsZero() && time.Since(r.ended) < r.MinRefresh {
		return nil
	}
	done := make(chan struct{})
	r.inflight = done
	// The fetch is the issuer's, not one caller's: a caller that gives up
	// does not cancel it for the others. Client.Timeout bounds it.
	go func() {
		keys, err := r.fetch(context.Background())
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ended, r.failed, r.inflight = time.Now(), err != nil, nil
		if err == nil {
			r.keys, r.fetched = keys, r.ended
		} else if r.Log != nil {
			r.Log.Warn("JWKS fetch failed; trying again no sooner than min_refresh", slog.String("url", r.URL),
				slog.Duration("min_refresh", r.MinRefresh), slog.Any("error", err))
		}
		close(done)
	}()
	return done
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
