package agentcard_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

// update rewrites the vectors: go test ./agentcard -run TestVectors -update
// It makes testdata/vector-ed25519.jwk once, then the payloads and signed
// cards from the hand-written testdata/*-card.json.
var update = flag.Bool("update", false, "rewrite testdata vectors")

const vectorJKU = "https://vector.example/.well-known/jwks.json"

// vectors are cards signed the way the SDKs sign: "sdk" as @a2a-js/sdk and
// a2a-python compute the payload (JCS of the 1.0 members, empty values
// dropped); "python" adds what only Python does: non-ASCII escaped by
// json.dumps, an explicit false capability kept, and PyJWT's typ "JWT".
var vectors = []struct {
	name      string
	asciiOnly bool
	typ       jose.ContentType
}{
	{"sdk", false, "JOSE"},
	{"python", true, "JWT"},
}

func TestVectors(t *testing.T) {
	key := vectorKey(t)
	v := newVerifier(t, pinned(key))
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			raw := readFile(t, vec.name+"-card.json")
			payload := sdkCanonical(t, raw, vec.asciiOnly)
			if *update {
				writeVector(t, vec.name, raw, payload, key, vec.typ)
			}
			if want := readFile(t, vec.name+"-card.payload"); !bytes.Equal(payload, want) {
				t.Fatalf("SDK-way payload changed:\n got %s\nwant %s", payload, want)
			}
			card, err := agentcard.ParseCard(readFile(t, vec.name+"-card.signed.json"))
			if err != nil {
				t.Fatal(err)
			}
			kid, err := v.Verify(t.Context(), card)
			if err != nil || kid != key.KeyID {
				t.Fatalf("Verify = %q, %v; want %q", kid, err, key.KeyID)
			}
			card.Description += "."
			if _, err := v.Verify(t.Context(), card); err == nil {
				t.Fatal("changed vector card verified")
			}
		})
	}
}

// TestVectorSDKMatchesSign checks that Handoff signs exactly what the SDKs
// verify: the same payload, and (Ed25519 being deterministic) the same bytes.
func TestVectorSDKMatchesSign(t *testing.T) {
	key := vectorKey(t)
	card, err := agentcard.ParseCard(readFile(t, "sdk-card.json"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := agentcard.CanonicalPayload(card)
	if err != nil {
		t.Fatal(err)
	}
	if want := readFile(t, "sdk-card.payload"); !bytes.Equal(payload, want) {
		t.Fatalf("CanonicalPayload:\n got %s\nwant %s", payload, want)
	}
	signed := mustSign(t, card, key, vectorJKU)
	vector, err := agentcard.ParseCard(readFile(t, "sdk-card.signed.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := signed.Signatures[0], vector.Signatures[0]; got.Protected != want.Protected || got.Signature != want.Signature {
		t.Fatalf("Sign made %+v, the SDK-way vector has %+v", got, want)
	}
}

func writeVector(t *testing.T, name string, raw, payload []byte, key *jose.JSONWebKey, typ jose.ContentType) {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType(typ).WithHeader("jku", vectorJKU))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	compact, err := jws.DetachedCompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	protected, signature, _ := strings.Cut(compact, "..")
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var card map[string]any
	if err := dec.Decode(&card); err != nil {
		t.Fatal(err)
	}
	card["signatures"] = []any{map[string]any{"protected": protected, "signature": signature}}
	var signed bytes.Buffer
	enc := json.NewEncoder(&signed)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(card); err != nil {
		t.Fatal(err)
	}
	writeFile(t, name+"-card.payload", payload)
	writeFile(t, name+"-card.signed.json", signed.Bytes())
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
