package push_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/push"
)

// decodeSegment reads one base64url segment of a compact JWT as JSON.
func decodeSegment(t *testing.T, seg string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSignHeaderAndClaims(t *testing.T) {
	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		t.Run(string(alg), func(t *testing.T) {
			s := push.NewSigner(keySet(t, alg, "k1"), "https://agent.example/")
			body := []byte(`{"statusUpdate":{"taskId":"t1"}}`)
			tok, err := s.Sign("https://hooks.example/a2a", "t1", "d1", body, t0)
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(tok, ".")
			if len(parts) != 3 {
				t.Fatalf("not a compact JWT: %s", tok)
			}
			h := decodeSegment(t, parts[0])
			if h["alg"] != string(alg) || h["kid"] != "k1" || h["typ"] != "JWT" {
				t.Errorf("header %v", h)
			}
			sum := sha256.Sum256(body)
			want := map[string]any{
				"iss":         "https://agent.example/",
				"aud":         "https://hooks.example/a2a",
				"iat":         float64(t0.Unix()),
				"exp":         float64(t0.Add(5 * time.Minute).Unix()),
				"delivery_id": "d1",
				"task_id":     "t1",
				"body_sha256": base64.RawURLEncoding.EncodeToString(sum[:]),
			}
			c := decodeSegment(t, parts[1])
			if jti, _ := c["jti"].(string); !strings.HasPrefix(jti, "d1#") || len(jti) < 10 {
				t.Errorf("claim jti = %v, want d1# and a random suffix", c["jti"])
			}
			delete(c, "jti")
			for k, v := range want {
				if c[k] != v {
					t.Errorf("claim %s = %v, want %v", k, c[k], v)
				}
			}
			if len(c) != len(want) {
				t.Errorf("claims %v, want exactly %v", c, want)
			}
		})
	}
}

// The key with the latest NotBefore signs; none active is an error.
func TestSignFollowsRotation(t *testing.T) {
	older, err := agentcard.GenerateKey(jose.EdDSA, "old")
	if err != nil {
		t.Fatal(err)
	}
	newer, err := agentcard.GenerateKey(jose.ES256, "new")
	if err != nil {
		t.Fatal(err)
	}
	newer.Algorithm = "" // a KeySet allows keys without alg: Sign infers it
	ks, err := agentcard.NewKeySet(time.Hour,
		agentcard.Key{JWK: older, NotBefore: t0.Add(-time.Hour)},
		agentcard.Key{JWK: newer, NotBefore: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s := push.NewSigner(ks, "")
	for _, tc := range []struct {
		at       time.Time
		kid, alg string
	}{
		{t0, "old", "EdDSA"},
		{t0.Add(2 * time.Hour), "new", "ES256"},
	} {
		tok, err := s.Sign("https://hooks.example/", "t", "d", nil, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		h := decodeSegment(t, strings.Split(tok, ".")[0])
		if h["kid"] != tc.kid || h["alg"] != tc.alg {
			t.Errorf("at %s: header %v, want kid %s alg %s", tc.at, h, tc.kid, tc.alg)
		}
		if c := decodeSegment(t, strings.Split(tok, ".")[1]); c["iss"] != nil {
			t.Errorf("empty issuer written as %v", c["iss"])
		}
	}
	if _, err := s.Sign("https://hooks.example/", "t", "d", nil, t0.Add(-2*time.Hour)); !errors.Is(err, agentcard.ErrNoSigningKey) {
		t.Fatalf("before any key: %v", err)
	}
}
