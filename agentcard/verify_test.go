package agentcard_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		t.Run(string(alg), func(t *testing.T) {
			key := mustKey(t, alg, "k-"+string(alg))
			card := testCard()
			signed := mustSign(t, card, key, "")
			if card.Signatures != nil {
				t.Fatal("Sign changed its input")
			}
			v := newVerifier(t, pinned(key))
			kid, err := v.Verify(t.Context(), signed)
			if err != nil || kid != key.KeyID {
				t.Fatalf("Verify = %q, %v", kid, err)
			}

			header := decodeHeader(t, signed.Signatures[0].Protected)
			if header["alg"] != string(alg) || header["kid"] != key.KeyID || header["typ"] != "JOSE" {
				t.Fatalf("protected header %v", header)
			}

			changed := *signed
			changed.Description = "Answers questions!" // one byte more
			_, err = v.Verify(t.Context(), &changed)
			wantOnly(t, err, agentcard.ErrBadSignature)
		})
	}
}

// TestServedUnionVerifies signs a card, serves it through a2a-go's 0.3
// compatibility producer (0.3 members beside the 1.0 ones) and verifies
// what a peer parses back.
func TestServedUnionVerifies(t *testing.T) {
	key := mustKey(t, jose.ES256, "")
	signed := mustSign(t, testCard(), key, "")
	producer := a2av0.NewStaticAgentCardProducer(signed).(interface {
		CardJSON(context.Context) ([]byte, error)
	})
	served, err := producer.CardJSON(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var members map[string]any
	if err := json.Unmarshal(served, &members); err != nil || members["url"] == nil || members["protocolVersion"] == nil {
		t.Fatalf("served card has no 0.3 members: %s", served)
	}
	card, err := agentcard.ParseCard(served)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newVerifier(t, pinned(key)).Verify(t.Context(), card); err != nil {
		t.Fatalf("Verify served card: %v", err)
	}
}

func TestSeveralSignatures(t *testing.T) {
	trusted, stranger := mustKey(t, jose.EdDSA, "trusted"), mustKey(t, jose.EdDSA, "stranger")
	card := mustSign(t, testCard(), stranger, "")
	card.Signatures = append(card.Signatures, mustSign(t, testCard(), trusted, "").Signatures...)
	kid, err := newVerifier(t, pinned(trusted)).Verify(t.Context(), card)
	if err != nil || kid != "trusted" {
		t.Fatalf("Verify = %q, %v", kid, err)
	}
}

func TestRefusals(t *testing.T) {
	key := mustKey(t, jose.EdDSA, "k1")
	signed := mustSign(t, testCard(), key, "")
	withSig := func(protected, sig string) *a2a.AgentCard {
		c := *signed
		c.Signatures = []a2a.AgentCardSignature{{Protected: protected, Signature: sig}}
		return &c
	}
	withHeader := func(h map[string]any, sig string) *a2a.AgentCard {
		b, _ := json.Marshal(h)
		return withSig(base64.RawURLEncoding.EncodeToString(b), sig)
	}
	// HS256 keyed with the public key's bytes: the classic confusion attack.
	hs := func() *a2a.AgentCard {
		c := withHeader(map[string]any{"alg": "HS256", "kid": "k1", "typ": "JOSE"}, "")
		payload, _ := agentcard.CanonicalPayload(c)
		pubJSON, _ := json.Marshal(key.Public())
		m := hmac.New(sha256.New, pubJSON)
		m.Write([]byte(c.Signatures[0].Protected + "." + base64.RawURLEncoding.EncodeToString(payload)))
		c.Signatures[0].Signature = base64.RawURLEncoding.EncodeToString(m.Sum(nil))
		return c
	}()
	unsigned := *signed
	unsigned.Signatures = nil

	foreign, foreignHits := jwksServer(t, jwksOf(t, key))
	trustedSrv, trustedHits := jwksServer(t, jwksOf(t, key))
	policy := pinned()
	policy.JKUPrefixes = []string{trustedSrv.URL + "/.well-known/"}
	stranger := mustKey(t, jose.EdDSA, "k2")

	tests := []struct {
		name string
		card *a2a.AgentCard
		want error
	}{
		{"missing signature", &unsigned, agentcard.ErrUnsigned},
		{"nil card", nil, agentcard.ErrUnsigned},
		{"alg none", withHeader(map[string]any{"alg": "none", "kid": "k1"}, ""), agentcard.ErrAlgorithm},
		{"HS256", hs, agentcard.ErrAlgorithm},
		{"alg not accepted", withHeader(map[string]any{"alg": "PS512", "kid": "k1"}, "AA"), agentcard.ErrAlgorithm},
		{"unknown kid", mustSign(t, testCard(), stranger, ""), agentcard.ErrUnknownKey},
		{"unknown kid at trusted jku", mustSign(t, testCard(), stranger, trustedSrv.URL+"/.well-known/jwks.json"), agentcard.ErrUnknownKey},
		{"foreign jku", mustSign(t, testCard(), stranger, foreign.URL+"/.well-known/jwks.json"), agentcard.ErrUntrustedJKU},
		{"jku escaping the prefix", mustSign(t, testCard(), stranger, trustedSrv.URL+"/.well-known/../moved"), agentcard.ErrUntrustedJKU},
		{"protected not base64url", withSig("!!!", "AA"), agentcard.ErrMalformed},
		{"protected not JSON", withSig(base64.RawURLEncoding.EncodeToString([]byte("{alg")), "AA"), agentcard.ErrMalformed},
		{"no kid", withHeader(map[string]any{"alg": "EdDSA"}, "AA"), agentcard.ErrMalformed},
		{"crit", withHeader(map[string]any{"alg": "EdDSA", "kid": "k1", "crit": []string{"exp"}, "exp": 1}, "AA"), agentcard.ErrMalformed},
		{"signature not base64url", withHeader(map[string]any{"alg": "EdDSA", "kid": "k1"}, "@@"), agentcard.ErrMalformed},
		{"signature of another card", withHeader(decodeHeader(t, signed.Signatures[0].Protected), mustSign(t, &a2a.AgentCard{Name: "x"}, key, "").Signatures[0].Signature), agentcard.ErrBadSignature},
		{"alg that does not fit the key", withHeader(map[string]any{"alg": "ES256", "kid": "k1"}, signed.Signatures[0].Signature), agentcard.ErrAlgorithm},
	}
	policy.Keys.Keys = append(policy.Keys.Keys, key.Public())
	v := newVerifier(t, policy)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kid, err := v.Verify(t.Context(), tt.card)
			if kid != "" {
				t.Fatalf("kid %q for a refused card", kid)
			}
			wantOnly(t, err, tt.want)
		})
	}
	if n := foreignHits.Load(); n != 0 {
		t.Fatalf("the foreign JWKS server was asked %d times", n)
	}
	if n := trustedHits.Load(); n != 1 {
		t.Fatalf("the trusted JWKS server was asked %d times, want 1", n)
	}
}

func TestTooManySignatures(t *testing.T) {
	key := mustKey(t, jose.EdDSA, "k1")
	card := mustSign(t, testCard(), key, "")
	for range 8 {
		card.Signatures = append(card.Signatures, card.Signatures[0])
	}
	_, err := newVerifier(t, pinned(key)).Verify(t.Context(), card)
	wantOnly(t, err, agentcard.ErrMalformed)
}

func TestJKUFetchAndCache(t *testing.T) {
	old, key := mustKey(t, jose.ES256, "old"), mustKey(t, jose.EdDSA, "new")
	srv, hits := jwksServer(t, jwksOf(t, old, key))
	jku := srv.URL + "/.well-known/jwks.json"
	v := newVerifier(t, agentcard.TrustPolicy{JKUPrefixes: []string{srv.URL + "/.well-known/"}})

	for i, k := range []*jose.JSONWebKey{key, old, key} {
		kid, err := v.Verify(t.Context(), mustSign(t, testCard(), k, jku))
		if err != nil || kid != k.KeyID {
			t.Fatalf("Verify %d = %q, %v", i, kid, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1 (cache hits)", n)
	}
}

func TestJKUFetchFailures(t *testing.T) {
	key := mustKey(t, jose.EdDSA, "k1")
	srv, _ := jwksServer(t, jwksOf(t, key))
	policy := agentcard.TrustPolicy{JKUPrefixes: []string{srv.URL + "/"}}
	tests := []struct {
		name string
		jku  string
		opts []agentcard.Option
	}{
		{"too large", srv.URL + "/.well-known/jwks.json", []agentcard.Option{agentcard.WithMaxJWKSBytes(16)}},
		{"redirect not followed", srv.URL + "/moved", nil},
		{"not found", srv.URL + "/none.json", nil},
		{"timeout", srv.URL + "/.well-known/jwks.json", []agentcard.Option{agentcard.WithFetchTimeout(time.Nanosecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newVerifier(t, policy, tt.opts...).Verify(t.Context(), mustSign(t, testCard(), key, tt.jku))
			wantOnly(t, err, agentcard.ErrJWKSUnavailable)
		})
	}
}

func TestJWKSSkipsSecretsAndForeignKeys(t *testing.T) {
	key := mustKey(t, jose.EdDSA, "k1")
	private, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{*key}})
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := jwksServer(t, private)
	v := newVerifier(t, agentcard.TrustPolicy{JKUPrefixes: []string{srv.URL}})
	_, err = v.Verify(t.Context(), mustSign(t, testCard(), key, srv.URL+"/.well-known/jwks.json"))
	wantOnly(t, err, agentcard.ErrUnknownKey) // a JWKS publishing a private key is not used
}

func TestNewVerifierRefusesBadPolicy(t *testing.T) {
	tests := map[string]agentcard.TrustPolicy{
		"relative prefix":  {JKUPrefixes: []string{"/keys/"}},
		"ftp prefix":       {JKUPrefixes: []string{"ftp://keys.example/"}},
		"prefix with user": {JKUPrefixes: []string{"https://u@keys.example/"}},
		"symmetric key":    {Keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "s"}}}},
		"key without kid":  {Keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{mustKey(t, jose.EdDSA, "x").Public()}}},
	}
	tests["key without kid"].Keys.Keys[0].KeyID = ""
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := agentcard.NewVerifier(p); err == nil {
				t.Fatal("policy accepted")
			}
		})
	}
}

func TestParseCardScopeForms(t *testing.T) {
	proto := `{"name":"a","securityRequirements":[{"schemes":{"b":{"list":["r"]},"c":{}}}],"skills":[{"id":"s","securityRequirements":[{"schemes":{"b":{"list":["w"]}}}]}]}`
	goForm := `{"name":"a","securityRequirements":[{"schemes":{"b":["r"],"c":null}}],"skills":[{"id":"s","securityRequirements":[{"schemes":{"b":["w"]}}]}]}`
	a, err := agentcard.ParseCard([]byte(proto))
	if err != nil {
		t.Fatal(err)
	}
	b, err := agentcard.ParseCard([]byte(goForm))
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := agentcard.CanonicalPayload(a)
	pb, _ := agentcard.CanonicalPayload(b)
	if string(pa) != string(pb) || a.SecurityRequirements[0]["b"][0] != "r" || a.Skills[0].SecurityRequirements[0]["b"][0] != "w" {
		t.Fatalf("scope forms differ:\n%s\n%s", pa, pb)
	}
	for _, bad := range []string{"", "null", "[]", `{"name":`, `{"skills":7}`} {
		if _, err := agentcard.ParseCard([]byte(bad)); !errors.Is(err, agentcard.ErrMalformed) {
			t.Errorf("ParseCard(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func decodeHeader(t testing.TB, protected string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(protected)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}
