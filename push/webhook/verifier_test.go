package webhook_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
)

const hook = "https://hooks.example/a2a"

var event = []byte(`{"statusUpdate":{"taskId":"t1","status":{"state":"TASK_STATE_WORKING"}}}`)

// delivery is the headers an agent sends with one signed delivery.
func delivery(t testing.TB, s *push.Signer, aud, deliveryID string, body []byte, at time.Time) http.Header {
	t.Helper()
	tok, err := s.Sign(aud, "t1", deliveryID, body, at)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(webhook.HeaderSignature, tok)
	h.Set(webhook.HeaderDeliveryID, deliveryID)
	return h
}

func bodySHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// rawJWT signs claims with key, with the given typ, bypassing the Signer.
func rawJWT(t *testing.T, alg jose.SignatureAlgorithm, key any, typ string, claims ...any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	b := jwt.Signed(sig)
	for _, c := range claims {
		b = b.Claims(c)
	}
	tok, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestVerifyRoundTrip(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		t.Run(string(alg), func(t *testing.T) {
			ks := keySet(t, alg, "k1")
			jwks, _ := serveJWKS(t, ks)
			v := webhook.NewVerifier(jwks, hook, webhook.WithClock(clock(t0.Add(time.Minute))), webhook.WithIssuer("https://agent.example/"))
			h := delivery(t, push.NewSigner(ks, "https://agent.example/"), hook, "d1", event, t0)
			got, err := v.Verify(t.Context(), h, event)
			if err != nil {
				t.Fatal(err)
			}
			if got.TaskID != "t1" || got.DeliveryID != "d1" || got.KeyID != "k1" || !bytes.Equal(got.Body, event) {
				t.Fatalf("verified %+v", got)
			}
		})
	}
}

func TestVerifyRefusals(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, _ := serveJWKS(t, ks)
	signer := push.NewSigner(ks, "https://agent.example/")
	stranger := push.NewSigner(keySet(t, jose.EdDSA, "k2"), "https://agent.example/")
	impostor := push.NewSigner(keySet(t, jose.EdDSA, "k1"), "https://agent.example/") // same kid, other key
	key, err := ks.SigningKey(t0)
	if err != nil {
		t.Fatal(err)
	}
	good := delivery(t, signer, hook, "d1", event, t0)
	with := func(h http.Header, name, value string) http.Header {
		h = h.Clone()
		h.Set(name, value)
		return h
	}
	claims := jwt.Claims{Audience: jwt.Audience{hook}, IssuedAt: jwt.NewNumericDate(t0), ID: "d1"}
	own := map[string]any{"task_id": "t1", "body_sha256": bodySHA256(event), "delivery_id": "d1"}
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		opts []webhook.Option
		want error
	}{
		{"no signature", http.Header{}, event, nil, webhook.ErrBadSignature},
		{"not a JWT", with(good, webhook.HeaderSignature, "a.b.c"), event, nil, webhook.ErrBadSignature},
		{"tampered signature", with(good, webhook.HeaderSignature, good.Get(webhook.HeaderSignature)[:len(good.Get(webhook.HeaderSignature))-4]+"AAAA"), event, nil, webhook.ErrBadSignature},
		{"same kid, other key", delivery(t, impostor, hook, "d1", event, t0), event, nil, webhook.ErrBadSignature},
		{"HS256 with the public key as secret", with(good, webhook.HeaderSignature, rawJWT(t, jose.HS256, []byte(strings.Repeat("k", 32)), "JWT", claims, own)), event, nil, webhook.ErrBadSignature},
		{"typ JOSE", with(good, webhook.HeaderSignature, rawJWT(t, jose.EdDSA, key, "JOSE", claims, own)), event, nil, webhook.ErrBadSignature},
		{"no jti", with(good, webhook.HeaderSignature, rawJWT(t, jose.EdDSA, key, "JWT", jwt.Claims{Audience: jwt.Audience{hook}, IssuedAt: jwt.NewNumericDate(t0)}, own)), event, nil, webhook.ErrBadSignature},
		{"no iat", with(good, webhook.HeaderSignature, rawJWT(t, jose.EdDSA, key, "JWT", jwt.Claims{Audience: jwt.Audience{hook}, ID: "d1"}, own)), event, nil, webhook.ErrStale},
		{"unknown kid", delivery(t, stranger, hook, "d1", event, t0), event, nil, webhook.ErrUnknownKey},
		{"changed body", good, []byte(`{"statusUpdate":{"taskId":"t2"}}`), nil, webhook.ErrBodyMismatch},
		{"empty body", good, nil, nil, webhook.ErrBodyMismatch},
		{"wrong audience", delivery(t, signer, "https://evil.example/a2a", "d1", event, t0), event, nil, webhook.ErrWrongAudience},
		{"audience path differs", delivery(t, signer, hook+"/", "d1", event, t0), event, nil, webhook.ErrWrongAudience},
		{"wrong issuer", good, event, []webhook.Option{webhook.WithIssuer("https://other.example/")}, webhook.ErrWrongIssuer},
		{"old iat", delivery(t, signer, hook, "d1", event, t0.Add(-5*time.Minute-time.Second)), event, nil, webhook.ErrStale},
		{"old iat, shorter max age", delivery(t, signer, hook, "d1", event, t0.Add(-time.Minute)), event, []webhook.Option{webhook.WithMaxAge(30 * time.Second)}, webhook.ErrStale},
		{"iat ahead", delivery(t, signer, hook, "d1", event, t0.Add(time.Minute+time.Second)), event, nil, webhook.ErrStale},
		{"expired", with(good, webhook.HeaderSignature, rawJWT(t, jose.EdDSA, key, "JWT", jwt.Claims{Audience: jwt.Audience{hook}, IssuedAt: jwt.NewNumericDate(t0), Expiry: jwt.NewNumericDate(t0.Add(-2 * time.Minute)), ID: "d1"}, own)), event, nil, webhook.ErrStale},
		{"no token", good, event, []webhook.Option{webhook.WithToken("right")}, webhook.ErrBadToken},
		{"wrong token", with(good, webhook.HeaderToken, "wrong"), event, []webhook.Option{webhook.WithToken("right")}, webhook.ErrBadToken},
		{"wrong token wins over the X header", with(with(good, webhook.HeaderToken, "wrong"), webhook.HeaderTokenX, "right"), event, []webhook.Option{webhook.WithToken("right")}, webhook.ErrBadToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := webhook.NewVerifier(jwks, hook, append([]webhook.Option{webhook.WithClock(clock(t0))}, tc.opts...)...)
			got, err := v.Verify(t.Context(), tc.h, tc.body)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %+v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, _ := serveJWKS(t, ks)
	signer := push.NewSigner(ks, "")
	for _, tc := range []struct {
		name, aud, want string
		h               func(http.Header)
		opts            []webhook.Option
	}{
		{"audience without a path", "http://127.0.0.1:9000", "http://127.0.0.1:9000/", nil, nil},
		{"audience case and default port", "https://Hooks.Example:443/a2a", hook, nil, nil},
		{"token", hook, hook, func(h http.Header) { h.Set(webhook.HeaderToken, "right") }, []webhook.Option{webhook.WithToken("right")}},
		{"token in the X header", hook, hook, func(h http.Header) { h.Set(webhook.HeaderTokenX, "right") }, []webhook.Option{webhook.WithToken("right")}},
		{"iat 5 minutes old", hook, hook, nil, []webhook.Option{webhook.WithClock(clock(t0.Add(5 * time.Minute)))}},
		{"iat within the skew", hook, hook, nil, []webhook.Option{webhook.WithClock(clock(t0.Add(-time.Minute)))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := delivery(t, signer, tc.aud, "d1", event, t0)
			if tc.h != nil {
				tc.h(h)
			}
			v := webhook.NewVerifier(jwks, tc.want, append([]webhook.Option{webhook.WithClock(clock(t0))}, tc.opts...)...)
			if _, err := v.Verify(t.Context(), h, event); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVerifyRefusesReplay(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, _ := serveJWKS(t, ks)
	signer := push.NewSigner(ks, "")
	now := t0
	v := webhook.NewVerifier(jwks, hook, webhook.WithClock(func() time.Time { return now }))
	h := delivery(t, signer, hook, "d1", event, t0)
	if _, err := v.Verify(t.Context(), h, event); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(t.Context(), h, event); !errors.Is(err, webhook.ErrReplay) {
		t.Fatalf("same delivery again: %v", err)
	}
	// A new attempt of the same delivery (its answer was lost) has its own
	// jti: it is taken, with the same delivery id to drop it as a duplicate.
	if got, err := v.Verify(t.Context(), delivery(t, signer, hook, "d1", event, t0.Add(time.Second)), event); err != nil || got.DeliveryID != "d1" {
		t.Fatalf("retry of the delivery: %v %v", got, err)
	}
	if _, err := v.Verify(t.Context(), delivery(t, signer, hook, "d2", event, t0), event); err != nil {
		t.Fatalf("another delivery: %v", err)
	}
	// Once d1's first signature is stale, a replay of it is refused as stale.
	now = t0.Add(7 * time.Minute)
	if _, err := v.Verify(t.Context(), h, event); !errors.Is(err, webhook.ErrStale) {
		t.Fatalf("old replay: %v", err)
	}

}

func TestVerifyConcurrentReplayAcceptsOne(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, _ := serveJWKS(t, ks)
	v := webhook.NewVerifier(jwks, hook, webhook.WithClock(clock(t0)))
	h := delivery(t, push.NewSigner(ks, ""), hook, "d1", event, t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for range 8 {
		wg.Go(func() {
			if _, err := v.Verify(t.Context(), h, event); err == nil {
				mu.Lock()
				accepted++
				mu.Unlock()
			} else if !errors.Is(err, webhook.ErrReplay) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if accepted != 1 {
		t.Fatalf("%d of 8 identical deliveries accepted", accepted)
	}
}

// An unknown kid refetches the JWKS, but not more than every 30 seconds.
func TestVerifyJWKSFetches(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, fetches := serveJWKS(t, ks)
	v := webhook.NewVerifier(jwks, hook, webhook.WithClock(clock(t0)))
	if _, err := v.Verify(t.Context(), delivery(t, push.NewSigner(ks, ""), hook, "d1", event, t0), event); err != nil {
		t.Fatal(err)
	}
	stranger := push.NewSigner(keySet(t, jose.EdDSA, "k2"), "")
	for i := range 5 {
		_, err := v.Verify(t.Context(), delivery(t, stranger, hook, "x", event, t0), event)
		if !errors.Is(err, webhook.ErrUnknownKey) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}
}

func TestVerifyJWKSUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	ks := keySet(t, jose.EdDSA, "k1")
	v := webhook.NewVerifier(srv.URL, hook, webhook.WithClock(clock(t0)), webhook.WithHTTPClient(srv.Client()))
	_, err := v.Verify(t.Context(), delivery(t, push.NewSigner(ks, ""), hook, "d1", event, t0), event)
	if !errors.Is(err, webhook.ErrJWKSUnavailable) {
		t.Fatalf("got %v", err)
	}
}

// receiver serves v.Middleware around a handler that answers status and
// records what it saw.
type receiver struct {
	mu     sync.Mutex
	bodies [][]byte
	seen   []*webhook.Verified
	status int
}

func (wh *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	d, ok := webhook.VerifiedFrom(r.Context())
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if err != nil || !ok {
		http.Error(w, "no verified delivery", http.StatusInternalServerError)
		return
	}
	wh.bodies = append(wh.bodies, body)
	wh.seen = append(wh.seen, d)
	w.WriteHeader(wh.status)
}

func (wh *receiver) setStatus(s int) {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	wh.status = s
}

func (wh *receiver) calls() int {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return len(wh.seen)
}

func post(t *testing.T, url string, h http.Header, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// serveWebhook serves v.Middleware(wh) on loopback, v's audience being the
// URL it returns.
func serveWebhook(t *testing.T, jwks string, wh http.Handler) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String() + "/hook"
	srv.Config.Handler = webhook.NewVerifier(jwks, url, webhook.WithClock(clock(t0))).Middleware(wh)
	srv.Start()
	t.Cleanup(srv.Close)
	return url
}

func TestMiddleware(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, _ := serveJWKS(t, ks)
	wh := &receiver{status: http.StatusNoContent}
	url := serveWebhook(t, jwks, wh)
	h := delivery(t, push.NewSigner(ks, ""), url, "d1", event, t0)
	if code, msg := post(t, url, http.Header{}, event); code != http.StatusUnauthorized || msg != webhook.ErrBadSignature.Error() {
		t.Fatalf("unsigned: %d %q", code, msg)
	}
	if code, msg := post(t, url, h, []byte(`{}`)); code != http.StatusUnauthorized || msg != webhook.ErrBodyMismatch.Error() {
		t.Fatalf("changed body: %d %q", code, msg)
	}
	if wh.calls() != 0 {
		t.Fatal("the handler saw a refused delivery")
	}
	if code, msg := post(t, url, h, event); code != http.StatusNoContent {
		t.Fatalf("signed: %d %q", code, msg)
	}
	wh.mu.Lock()
	defer wh.mu.Unlock()
	if !bytes.Equal(wh.bodies[0], event) || wh.seen[0].DeliveryID != "d1" || wh.seen[0].TaskID != "t1" || wh.seen[0].KeyID != "k1" {
		t.Errorf("handler saw %q %+v", wh.bodies[0], wh.seen[0])
	}
}

// A delivery the handler fails is let through again, since the agent
// retries it; one it accepted is a replay.
func TestMiddlewareForgetsFailedDeliveries(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, _ := serveJWKS(t, ks)
	wh := &receiver{status: http.StatusServiceUnavailable}
	url := serveWebhook(t, jwks, wh)
	h := delivery(t, push.NewSigner(ks, ""), url, "d1", event, t0)
	if code, _ := post(t, url, h, event); code != http.StatusServiceUnavailable {
		t.Fatalf("first attempt: %d", code)
	}
	wh.setStatus(http.StatusOK)
	if code, msg := post(t, url, h, event); code != http.StatusOK {
		t.Fatalf("retry: %d %q", code, msg)
	}
	if code, msg := post(t, url, h, event); code != http.StatusUnauthorized || msg != webhook.ErrReplay.Error() {
		t.Fatalf("replay: %d %q", code, msg)
	}
	if wh.calls() != 2 {
		t.Fatalf("handler called %d times, want 2", wh.calls())
	}
}

func TestMiddlewareLimitsBody(t *testing.T) {
	ks := keySet(t, jose.EdDSA, "k1")
	jwks, fetches := serveJWKS(t, ks)
	wh := &receiver{status: http.StatusOK}
	srv := httptest.NewServer(webhook.NewVerifier(jwks, hook).Middleware(wh))
	t.Cleanup(srv.Close)
	if code, _ := post(t, srv.URL, http.Header{}, bytes.Repeat([]byte("x"), 4<<20+1)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", code)
	}
	if wh.calls() != 0 || fetches.Load() != 0 {
		t.Fatal("an oversized body was verified")
	}
}
