package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// jwksServer serves jwks on its first fetch (with fastFirst) and stalls on
// every other until release is called or the test ends (a JWKS endpoint
// that hangs), then serves jwks too. With fail set, every fetch answers
// that status.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int32
	stalled chan struct{} // one value per stalled fetch, as it starts
	release func()
}

func newJWKSServer(t *testing.T, jwks []byte, fastFirst bool, fail int) *jwksServer {
	t.Helper()
	release := make(chan struct{})
	s := &jwksServer{stalled: make(chan struct{}, 100), release: sync.OnceFunc(func() { close(release) })}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.fetches.Add(1)
		switch {
		case fail != 0:
			w.WriteHeader(fail)
		case n == 1 && fastFirst:
			_, _ = w.Write(jwks)
		default:
			s.stalled <- struct{}{}
			select {
			case <-release:
				_, _ = w.Write(jwks)
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(func() { s.release(); s.Close() })
	return s
}

// within runs f and fails the test unless it returns within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// TestRemoteKeysKnownKeyNeverWaits: while a fetch of the JWKS stalls
// (started by a token with an unknown kid), a caller whose kid is known is
// served from the cache at once.
func TestRemoteKeysKnownKeyNeverWaits(t *testing.T) {
	k := newIssuerKey(t, "k1")
	srv := newJWKSServer(t, k.jwks, true, 0)
	rk := auth.NewRemoteKeys(srv.URL)
	rk.MinRefresh = time.Nanosecond
	if _, err := rk.Key(t.Context(), "k1"); err != nil {
		t.Fatal(err)
	}
	unknown := make(chan error, 1)
	go func() {
		_, err := rk.Key(t.Context(), "k-unknown")
		unknown <- err
	}()
	<-srv.stalled // the refetch the unknown kid asked for hangs now
	within(t, 500*time.Millisecond, "Key(k1) during a stalled JWKS fetch", func() {
		if _, err := rk.Key(t.Context(), "k1"); err != nil {
			t.Errorf("known kid: %v", err)
		}
	})
	// The unknown kid's caller waits no longer than its own context.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	within(t, 500*time.Millisecond, "Key(unknown) with a 50ms context", func() {
		if _, err := rk.Key(ctx, "k-other"); err == nil {
			t.Error("an unknown kid was accepted")
		}
	})
	srv.release()
	if err := <-unknown; !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("the first unknown kid, once the fetch ended: %v, want ErrUnknownKey", err)
	}
}

// TestRemoteKeysStaleKeyServedWhileRefreshing: past the TTL, a known key is
// still served at once while the refresh runs in the background.
func TestRemoteKeysStaleKeyServedWhileRefreshing(t *testing.T) {
	k := newIssuerKey(t, "k1")
	srv := newJWKSServer(t, k.jwks, true, 0)
	rk := auth.NewRemoteKeys(srv.URL)
	rk.TTL, rk.MinRefresh = time.Nanosecond, time.Nanosecond
	if _, err := rk.Key(t.Context(), "k1"); err != nil {
		t.Fatal(err)
	}
	within(t, 500*time.Millisecond, "Key(k1) past the TTL", func() {
		if _, err := rk.Key(t.Context(), "k1"); err != nil {
			t.Errorf("stale known kid: %v", err)
		}
	})
	<-srv.stalled // the refresh did start, in the background
}

// TestRemoteKeysSingleFlight: many callers with unknown kids at once, on a
// cold cache, share one fetch.
func TestRemoteKeysSingleFlight(t *testing.T) {
	k := newIssuerKey(t, "k1")
	srv := newJWKSServer(t, k.jwks, false, 0)
	rk := auth.NewRemoteKeys(srv.URL)
	rk.MinRefresh = time.Hour
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := rk.Key(t.Context(), "k-unknown"); !errors.Is(err, auth.ErrUnknownKey) {
				t.Errorf("unknown kid: %v, want ErrUnknownKey", err)
			}
		})
	}
	<-srv.stalled
	srv.release()
	wg.Wait()
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1 for all 50 unknown kids", n)
	}
}

// TestRemoteKeysNegativeCache: a failed fetch is not retried before
// MinRefresh, whatever the callers send, and each of them gets a clear error
// at once.
func TestRemoteKeysNegativeCache(t *testing.T) {
	srv := newJWKSServer(t, nil, false, http.StatusInternalServerError)
	rk := auth.NewRemoteKeys(srv.URL)
	for i := range 20 {
		_, err := rk.Key(t.Context(), "k1")
		if !errors.Is(err, auth.ErrUnknownKey) {
			t.Fatalf("call %d: err = %v, want ErrUnknownKey", i, err)
		}
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches of a failing JWKS within MinRefresh, want 1", n)
	}
}
