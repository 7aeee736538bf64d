package auth_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/handoff-a2a/handoff/internal/auth"
)

type issuerKey struct {
	priv jose.JSONWebKey
	jwks []byte
}

func newIssuerKey(t testing.TB, kid string) issuerKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: pub, KeyID: kid, Algorithm: string(jose.EdDSA), Use: "sig"}}}
	b, _ := json.Marshal(set)
	return issuerKey{priv: jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: string(jose.EdDSA)}, jwks: b}
}

func (k issuerKey) token(t testing.TB, claims jwt.Claims, extra map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: k.priv}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.Signed(sig).Claims(claims).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func request(header, value string) *http.Request {
	r := httptest.NewRequest("POST", "/", nil)
	if header != "" {
		r.Header.Set(header, value)
	}
	return r
}

func TestAPIKeys(t *testing.T) {
	h, _ := auth.ParseAPIKeyHash(auth.HashAPIKey("s3cret"))
	a := &auth.Authenticator{APIKeys: []auth.APIKey{{Name: "ci", Tenant: "acme", SHA256: h}}}
	p, err := a.Authenticate(request("X-API-Key", "s3cret"))
	if err != nil || p.Name != "key:ci" || p.Tenant != "acme" {
		t.Fatalf("good key: %+v %v", p, err)
	}
	if _, err := a.Authenticate(request("X-API-Key", "wrong")); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := a.Authenticate(request("", "")); !errors.Is(err, auth.ErrNoCredentials) {
		t.Fatalf("no key: %v", err)
	}
	a.Anonymous = true
	if p, err := a.Authenticate(request("", "")); p != nil || err != nil {
		t.Fatalf("anonymous: %v %v", p, err)
	}
	if _, err := a.Authenticate(request("X-API-Key", "wrong")); !errors.Is(err, auth.ErrBadCredentials) {
		t.Fatalf("a bad key must not fall back to anonymous: %v", err)
	}
	if _, err := auth.ParseAPIKeyHash("abc"); err == nil {
		t.Fatal("short hash accepted")
	}
}

func TestJWT(t *testing.T) {
	k := newIssuerKey(t, "k1")
	other := newIssuerKey(t, "k1") // same kid, another key: a forged token
	keys, err := auth.ParseJWKS(k.jwks)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a := &auth.Authenticator{
		Issuers: []auth.Issuer{{Issuer: "https://idp.test", Audience: "agent-a", Keys: keys, Skew: time.Minute, TenantClaim: "tenant"}},
		Now:     func() time.Time { return now },
	}
	good := jwt.Claims{Issuer: "https://idp.test", Subject: "alice", Audience: jwt.Audience{"agent-a"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
	p, err := a.Authenticate(request("Authorization", "Bearer "+k.token(t, good, map[string]any{"tenant": "acme"})))
	if err != nil || p.Name != "jwt:https://idp.test#alice" || p.Tenant != "acme" {
		t.Fatalf("good token: %+v %v", p, err)
	}
	expired := good
	expired.Expiry = jwt.NewNumericDate(now.Add(-2 * time.Minute))
	wrongAud := good
	wrongAud.Audience = jwt.Audience{"agent-b"}
	noExp := good
	noExp.Expiry = nil
	foreign := good
	foreign.Issuer = "https://evil.test"
	for name, tc := range map[string]struct {
		header string
		want   string
	}{
		"expired":         {"Bearer " + k.token(t, expired, nil), "expired"},
		"wrong audience":  {"Bearer " + k.token(t, wrongAud, nil), "aud"},
		"no expiry":       {"Bearer " + k.token(t, noExp, nil), "expiry"},
		"foreign issuer":  {"Bearer " + k.token(t, foreign, nil), "issuer"},
		"wrong signature": {"Bearer " + other.token(t, good, nil), "signature"},
		"not a jwt":       {"Bearer abc.def", "not a JWT"},
		"basic auth":      {"Basic dXNlcjpwdw==", "Bearer"},
		"hs256":           {"Bearer " + hs256(t, good), "accepted algorithm"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := a.Authenticate(request("Authorization", tc.header))
			if !errors.Is(err, auth.ErrBadCredentials) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func hs256(t *testing.T, c jwt.Claims) string {
	sig, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")},
		(&jose.SignerOptions{}).WithHeader("kid", "k1"))
	s, err := jwt.Signed(sig).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRemoteKeys(t *testing.T) {
	k := newIssuerKey(t, "k1")
	fetches := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches++
		w.Write(k.jwks)
	}))
	defer srv.Close()
	rk := auth.NewRemoteKeys(srv.URL)
	for range 3 {
		if _, err := rk.Key(t.Context(), "k1"); err != nil {
			t.Fatal(err)
		}
	}
	if fetches != 1 {
		t.Fatalf("fetched %d times, want 1 (cached)", fetches)
	}
	if _, err := rk.Key(t.Context(), "nope"); !errors.Is(err, auth.ErrUnknownKey) {
		t.Fatalf("unknown kid: %v", err)
	}
	if fetches != 1 {
		t.Fatalf("an unknown kid refetched within MinRefresh: %d fetches", fetches)
	}
}

func TestParseJWKSRefusesPrivateKeys(t *testing.T) {
	k := newIssuerKey(t, "k1")
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.priv}})
	if _, err := auth.ParseJWKS(b); err == nil {
		t.Fatal("private key accepted as a trust anchor")
	}
}

// FuzzAuthenticate sends arbitrary Authorization and API key headers: never
// a panic, and never a principal without a valid credential.
func FuzzAuthenticate(f *testing.F) {
	k := newIssuerKey(f, "k1")
	keys, _ := auth.ParseJWKS(k.jwks)
	now := time.Now()
	good := jwt.Claims{Issuer: "https://idp.test", Subject: "alice", Audience: jwt.Audience{"agent-a"}, Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	f.Add("Bearer "+k.token(f, good, nil), "")
	f.Add("Bearer e30.e30.", "")
	f.Add("", "s3cret")
	f.Add("bearer  x", "")
	h, _ := auth.ParseAPIKeyHash(auth.HashAPIKey("s3cret"))
	a := &auth.Authenticator{
		APIKeys: []auth.APIKey{{Name: "ci", SHA256: h}},
		Issuers: []auth.Issuer{{Issuer: "https://idp.test", Audience: "agent-a", Keys: keys}},
	}
	f.Fuzz(func(t *testing.T, authz, key string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = []string{authz}
		r.Header["X-Api-Key"] = []string{key}
		p, err := a.Authenticate(r)
		if err == nil && p == nil {
			t.Fatal("no error and no principal with anonymous access off")
		}
		if p != nil && p.Method == "api_key" && key != "s3cret" {
			t.Fatalf("key %q accepted", key)
		}
	})
}

// TestAPIKeyWithBadBearerIsRefused: a request carrying a valid API key and
// a bearer token that does not verify is refused, not served as the key's
// caller; a request carrying two valid credentials is refused too, since it
// names two callers.
func TestAPIKeyWithBadBearerIsRefused(t *testing.T) {
	k := newIssuerKey(t, "k1")
	keys, err := auth.ParseJWKS(k.jwks)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := auth.ParseAPIKeyHash(auth.HashAPIKey("s3cret"))
	now := time.Now()
	a := &auth.Authenticator{
		APIKeys: []auth.APIKey{{Name: "ci", SHA256: h}},
		Issuers: []auth.Issuer{{Issuer: "https://idp.test", Audience: "agent-a", Keys: keys}},
	}
	good := jwt.Claims{Issuer: "https://idp.test", Subject: "alice", Audience: jwt.Audience{"agent-a"}, Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	for name, tc := range map[string]struct {
		authz string
		want  string
	}{
		"not a jwt":     {"Bearer abc.def", "not a JWT"},
		"bad scheme":    {"Basic dXNlcjpwdw==", "Bearer"},
		"forged":        {"Bearer " + newIssuerKey(t, "k1").token(t, good, nil), "signature"},
		"two callers":   {"Bearer " + k.token(t, good, nil), "one credential"},
		"empty  bearer": {"Bearer ", "Bearer"},
	} {
		t.Run(name, func(t *testing.T) {
			r := request("X-API-Key", "s3cret")
			r.Header.Set("Authorization", tc.authz)
			p, err := a.Authenticate(r)
			if !errors.Is(err, auth.ErrBadCredentials) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Authenticate = %+v, %v; want ErrBadCredentials mentioning %q", p, err, tc.want)
			}
		})
	}
}
