package agentcard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"unicode/utf16"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

// sentinels are the verification refusals; each refusal test wants exactly one.
var sentinels = []error{
	agentcard.ErrUnsigned, agentcard.ErrAlgorithm, agentcard.ErrUnknownKey, agentcard.ErrUntrustedJKU,
	agentcard.ErrBadSignature, agentcard.ErrMalformed, agentcard.ErrJWKSUnavailable,
}

func wantOnly(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	for _, s := range sentinels {
		if s != want && errors.Is(err, s) {
			t.Fatalf("error %v also matches %v", err, s)
		}
	}
}

// testCard is a card with every kind of member, some of them empty.
func testCard() *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:        "Test Agent",
		Description: "Answers questions.",
		Version:     "1.2.3",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: "https://agent.example/a2a/jsonrpc", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: "https://agent.example/a2a/jsonrpc", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
		},
		Provider:           &a2a.AgentProvider{Org: "Example", URL: "https://example.org"},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{{URI: "https://ext.example/v1", Params: map[string]any{"n": 2}}}},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "bearer", BearerFormat: "JWT"},
		},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"bearer": {"read"}}},
		Skills: []a2a.AgentSkill{
			{ID: "qa", Name: "Q&A", Description: "Answers <questions>.", Tags: []string{"qa"}, Examples: []string{}},
			{ID: "sum", Name: "Summary", Description: "", Tags: []string{}},
		},
	}
}

func pinned(keys ...*jose.JSONWebKey) agentcard.TrustPolicy {
	var p agentcard.TrustPolicy
	for _, k := range keys {
		p.Keys.Keys = append(p.Keys.Keys, k.Public())
	}
	return p
}

func newVerifier(t testing.TB, p agentcard.TrustPolicy, opts ...agentcard.Option) *agentcard.Verifier {
	t.Helper()
	v, err := agentcard.NewVerifier(p, opts...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func mustSign(t testing.TB, card *a2a.AgentCard, key *jose.JSONWebKey, jku string) *a2a.AgentCard {
	t.Helper()
	signed, err := agentcard.Sign(card, key, jku)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return signed
}

func mustKey(t testing.TB, alg jose.SignatureAlgorithm, kid string) *jose.JSONWebKey {
	t.Helper()
	k, err := agentcard.GenerateKey(alg, kid)
	if err != nil {
		t.Fatalf("GenerateKey: %v", err)
	}
	return k
}

// jwksServer serves body at /.well-known/jwks.json and counts the requests.
func jwksServer(t testing.TB, body []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(body)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/.well-known/jwks.json", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &hits
}

func jwksOf(t testing.TB, keys ...*jose.JSONWebKey) []byte {
	t.Helper()
	set := jose.JSONWebKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.Public())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// vectorKey is the fixed Ed25519 key of the test vectors.
func vectorKey(t testing.TB) *jose.JSONWebKey {
	t.Helper()
	path := filepath.Join("testdata", "vector-ed25519.jwk")
	if *update {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			k := mustKey(t, jose.EdDSA, "vector-ed25519")
			if err := agentcard.WriteKeyFile(path, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	k, err := agentcard.LoadKeyFile(path)
	if err != nil {
		t.Fatalf("vector key: %v", err)
	}
	return k
}

// sdkCanonical computes the signing payload the way @a2a-js/sdk and
// a2a-python do it from a card already in its 1.0 protobuf JSON form: drop
// "signatures", drop empty values recursively, sort keys, no whitespace.
// It is written apart from the package so that the vectors check the package.
// With asciiOnly, non-ASCII is escaped as Python's json.dumps does.
func sdkCanonical(t testing.TB, raw []byte, asciiOnly bool) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var card map[string]any
	if err := dec.Decode(&card); err != nil {
		t.Fatal(err)
	}
	delete(card, "signatures")
	var buf bytes.Buffer
	write(&buf, cleanEmpty(card), asciiOnly)
	return buf.Bytes()
}

func cleanEmpty(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		if v == "" {
			return nil
		}
	case []any:
		var out []any
		for _, e := range v {
			if c := cleanEmpty(e); c != nil {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if c := cleanEmpty(e); c != nil {
				out[k] = c
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}

func write(buf *bytes.Buffer, v any, asciiOnly bool) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			write(buf, k, asciiOnly)
			buf.WriteByte(':')
			write(buf, v[k], asciiOnly)
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			write(buf, e, asciiOnly)
		}
		buf.WriteByte(']')
	case string:
		var s bytes.Buffer
		enc := json.NewEncoder(&s)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		out := bytes.TrimSuffix(s.Bytes(), []byte("\n"))
		if asciiOnly {
			var a bytes.Buffer
			for _, r := range string(out) {
				if r < 0x7f {
					a.WriteRune(r)
					continue
				}
				for _, u := range utf16.Encode([]rune{r}) {
					fmt.Fprintf(&a, `\u%04x`, u)
				}
			}
			out = a.Bytes()
		}
		buf.Write(out)
	default:
		b, _ := json.Marshal(v)
		buf.Write(b)
	}
}
