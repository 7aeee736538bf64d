package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The official JS SDK's own Agent Card verification, run with node:
// js/verify-card.mjs calls verifyAgentCardSignature from @a2a-js/sdk, pinned
// in js/package.json and installed from the committed js/package-lock.json.
// It prints "verified kid=<kid>" and exits 0, exits 1 when the SDK rejects
// the card, and 2 when it could not read the card.

const (
	jsDir          = "js" // relative to this package's directory, where go test runs
	jsVerifyScript = "verify-card.mjs"
	jsSDKPackage   = "@a2a-js/sdk"
	jsInstallLimit = 5 * time.Minute
	jsMinNodeMajor = 20
)

var (
	jsSetupOnce sync.Once
	jsSetupErr  error
)

// requireJSVerifier makes sure node is on PATH and the SDK is installed in
// js/node_modules, running `npm ci` from the committed lock when it is not
// (once per test binary). A machine without node fails the test: the
// interoperability check is part of the suite, not optional.
func requireJSVerifier(t *testing.T) {
	t.Helper()
	jsSetupOnce.Do(func() { jsSetupErr = setupJS() })
	if jsSetupErr != nil {
		t.Fatalf("the JS SDK card verifier cannot run: %v", jsSetupErr)
	}
}

func setupJS() error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node is not on PATH; this test runs the official A2A JS SDK with Node.js %d or later (and installs it with npm ci): install Node.js and npm", jsMinNodeMajor)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %v", node, err)
	}
	version := strings.TrimSpace(string(out))
	major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if err != nil || major < jsMinNodeMajor {
		return fmt.Errorf("node %s at %s; @a2a-js/sdk needs Node.js %d or later", version, node, jsMinNodeMajor)
	}

	want, err := pinnedJSVersion(filepath.Join(jsDir, "package.json"), jsSDKPackage)
	if err != nil {
		return err
	}
	installed, _ := pinnedJSVersion(filepath.Join(jsDir, "node_modules", jsSDKPackage, "package.json"), "")
	if installed == want {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%s %s is not installed in %s/node_modules and npm is not on PATH to install it (npm ci)", jsSDKPackage, want, jsDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsInstallLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = jsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in e2e/%s: %v\n%s", jsDir, err, out)
	}
	installed, err = pinnedJSVersion(filepath.Join(jsDir, "node_modules", jsSDKPackage, "package.json"), "")
	if err != nil || installed != want {
		return fmt.Errorf("after npm ci, %s is %q (%v), want %s", jsSDKPackage, installed, err, want)
	}
	return nil
}

// pinnedJSVersion reads a package.json: the version required for dep, or
// with dep "" the package's own version.
func pinnedJSVersion(path, dep string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	if dep == "" {
		return pkg.Version, nil
	}
	v, ok := pkg.Dependencies[dep]
	if !ok {
		return "", fmt.Errorf("%s does not depend on %s", path, dep)
	}
	return v, nil
}

// jsVerify runs the SDK verifier with args and returns its exit code and
// its output (stdout and stderr together).
func jsVerify(t *testing.T, args ...string) (int, string) {
	t.Helper()
	requireJSVerifier(t)
	cmd := exec.CommandContext(callCtx(t), "node", append([]string{filepath.Join(jsDir, jsVerifyScript)}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("node %s %v: %v\n%s", jsVerifyScript, args, err, out)
		return 0, ""
	}
}

// wantJSVerified requires the SDK to accept the card with the key kid.
func wantJSVerified(t *testing.T, what, kid string, args ...string) {
	t.Helper()
	code, out := jsVerify(t, args...)
	if code != 0 || !strings.Contains(out, "verified kid="+kid+"\n") {
		t.Fatalf("%s: @a2a-js/sdk verification exited %d, want 0 and \"verified kid=%s\"; output:\n%s", what, code, kid, out)
	}
	t.Logf("%s: %s", what, strings.TrimSpace(out))
}

// wantJSRejected requires the SDK to refuse the card because its signature
// does not verify: exit 1 with jose's verification failure, not a failure
// to read the card or to fetch the key.
func wantJSRejected(t *testing.T, what string, args ...string) {
	t.Helper()
	code, out := jsVerify(t, args...)
	if code != 1 || !strings.Contains(out, "rejected: No valid signatures found on agent card.") || !strings.Contains(out, "ERR_JWS_SIGNATURE_VERIFICATION_FAILED") {
		t.Fatalf("%s: @a2a-js/sdk verification exited %d, want 1 with the SDK's \"No valid signatures\" because the signature does not verify (jose ERR_JWS_SIGNATURE_VERIFICATION_FAILED); output:\n%s", what, code, out)
	}
	t.Logf("%s: exit 1:\n%s", what, strings.TrimSpace(out))
}

// changeOneByte returns body with one byte of the card's top-level string
// member changed: the first ASCII letter of its value switches case. It
// fails the test unless exactly that member differs afterwards.
func changeOneByte(t *testing.T, body []byte, member string) []byte {
	t.Helper()
	var orig map[string]any
	if err := json.Unmarshal(body, &orig); err != nil {
		t.Fatalf("the card is not a JSON object: %v", err)
	}
	key := []byte(strconv.Quote(member) + ":")
	for from := 0; ; {
		i := bytes.Index(body[from:], key)
		if i < 0 {
			t.Fatalf("no top-level %q with a letter to change in the card: %s", member, body)
		}
		from += i + len(key)
		// The value's first letter, within its string.
		j := from
		for j < len(body) && (body[j] == ' ' || body[j] == '\n' || body[j] == '\t' || body[j] == '\r') {
			j++
		}
		if j >= len(body) || body[j] != '"' {
			continue
		}
		for j++; j < len(body) && body[j] != '"' && body[j] != '\\'; j++ {
			if c := body[j] | 0x20; c >= 'a' && c <= 'z' {
				changed := bytes.Clone(body)
				changed[j] ^= 0x20
				var got map[string]any
				if err := json.Unmarshal(changed, &got); err != nil {
					t.Fatalf("the changed card is not JSON: %v", err)
				}
				if got[member] == orig[member] {
					break // a nested member of that name: try the next one
				}
				got[member] = orig[member]
				if !jsonEqual(got, orig) {
					t.Fatalf("changing byte %d changed more than %q", j, member)
				}
				return changed
			}
		}
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// serveFixed serves fixed JSON bodies by path from an httptest server.
func serveFixed(t *testing.T, bodies map[string][]byte) *httptest.Server {
	t.Helper()
	srv := newFixedServer(t, bodies)
	srv.Start()
	return srv
}

// newFixedServer is serveFixed not started yet: its address is known
// (srv.Listener), so bodies naming it can be added before Start.
func newFixedServer(t *testing.T, bodies map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// cardSignatureHeader is what a card signature's protected header holds.
type cardSignatureHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
	Jku string `json:"jku,omitempty"`
}

// TestJSSDKVerifiesCard: the official JS SDK 1.x's own verification accepts
// the card Handoff signs and serves, and refuses it with one byte of its
// description changed.
func TestJSSDKVerifiesCard(t *testing.T) {
	requireJSVerifier(t)
	// The conformance config; Handoff signs its card with it (a key it
	// keeps under the data dir).
	ag := startAgent(t, agentConfig{})
	cardURL := ag.base + "/.well-known/agent-card.json"
	jwksURL := ag.base + "/.well-known/jwks.json"

	status, body, err := httpGet(callCtx(t), cardURL)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET the card: status %d, error %v, body %q", status, err, body)
	}
	var card struct {
		Signatures []struct {
			Protected string `json:"protected"`
			Signature string `json:"signature"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal([]byte(body), &card); err != nil {
		t.Fatalf("the card is not JSON: %v: %s", err, body)
	}
	if len(card.Signatures) != 1 {
		t.Fatalf("the card has %d signatures, want 1 (Handoff signs its card with one key); card: %s", len(card.Signatures), body)
	}
	raw, err := base64.RawURLEncoding.DecodeString(card.Signatures[0].Protected)
	if err != nil {
		t.Fatalf("signature protected header is not base64url: %v", err)
	}
	var hdr cardSignatureHeader
	if err := json.Unmarshal(raw, &hdr); err != nil {
		t.Fatalf("signature protected header is not JSON: %v: %s", err, raw)
	}
	if (hdr.Alg != "EdDSA" && hdr.Alg != "ES256") || hdr.Kid == "" || hdr.Typ != "JOSE" || hdr.Jku != jwksURL {
		t.Fatalf("protected header %s, want alg EdDSA or ES256, a kid, typ JOSE, jku %s", raw, jwksURL)
	}
	status, jwks, err := httpGet(callCtx(t), jwksURL)
	if err != nil || status != http.StatusOK || !strings.Contains(jwks, strconv.Quote(hdr.Kid)) {
		t.Fatalf("GET the JWKS: status %d, error %v, body %q; want the key %s", status, err, jwks, hdr.Kid)
	}

	wantJSVerified(t, "Handoff's card", hdr.Kid, cardURL)

	changed := changeOneByte(t, []byte(body), "description")
	srv := serveFixed(t, map[string][]byte{"/.well-known/agent-card.json": changed})
	wantJSRejected(t, "Handoff's card with one byte of its description changed", srv.URL+"/.well-known/agent-card.json")

	// handoff card verify agrees on both.
	out, err := exec.CommandContext(callCtx(t), handoffBin, "card", "verify", ag.base).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verified: signed by key "+hdr.Kid) {
		t.Fatalf("handoff card verify on the agent: %v: %s", err, out)
	}
	out, err = exec.CommandContext(callCtx(t), handoffBin, "card", "verify", srv.URL, "--jwks", jwksURL).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "signature") {
		t.Fatalf("handoff card verify on the changed card: want exit 1 naming the signature, got %v: %s", err, out)
	}
}

// TestJSSDKCardVerifierAgainstFixture checks verify-card.mjs and the SDK's
// rules on a card signed here, independently of Handoff's signer: Ed25519,
// a JWS with detached payload over the RFC 8785 form of the card's A2A 1.0
// members without "signatures" and without empty values, jku to a JWKS.
// The card served carries, beside those members, what Handoff's card
// carries too: the 0.3 compatibility members, the 0.3 shape of each
// security scheme, and members whose values are empty.
func TestJSSDKCardVerifierAgainstFixture(t *testing.T) {
	requireJSVerifier(t)
	const kid = "e2e-fixture-key"
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	bodies := map[string][]byte{}
	srv := newFixedServer(t, bodies) // started once bodies is complete
	base := "http://" + srv.Listener.Addr().String()
	jku := base + "/.well-known/jwks.json"
	bodies["/.well-known/jwks.json"] = mustJSON(t, map[string]any{"keys": []any{map[string]any{
		"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(pub),
		"kid": kid, "alg": "EdDSA", "use": "sig",
	}}})

	members10 := parseJSONObject(t, fixtureCard10)
	served := deepMerge(parseJSONObject(t, fixtureCard10), parseJSONObject(t, fixtureCardExtras))
	sign := func(payload []byte) map[string]any {
		hdr := mustJSON(t, cardSignatureHeader{Alg: "EdDSA", Kid: kid, Typ: "JOSE", Jku: jku})
		protected := base64.RawURLEncoding.EncodeToString(hdr)
		input := protected + "." + base64.RawURLEncoding.EncodeToString(payload)
		return map[string]any{
			"protected": protected,
			"signature": base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(input))),
		}
	}
	withSignature := func(card map[string]any, sig map[string]any) []byte {
		c := maps.Clone(card)
		c["signatures"] = []any{sig}
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := withSignature(served, sign(fixtureJCS(t, members10)))
	bodies["/card.json"] = good
	bodies["/description-changed.json"] = changeOneByte(t, good, "description")
	bodies["/url-changed.json"] = changeOneByte(t, good, "url")
	// Signed over the card as served, 0.3 members and empty values included.
	bodies["/signed-as-served.json"] = withSignature(served, sign(fixtureJCS(t, served)))
	srv.Start()

	t.Run("accepted", func(t *testing.T) {
		wantJSVerified(t, "the fixture card", kid, srv.URL+"/card.json")
	})
	t.Run("accepted from a file with --jwks", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "card.json")
		if err := os.WriteFile(path, good, 0o600); err != nil {
			t.Fatal(err)
		}
		wantJSVerified(t, "the fixture card read from a file", kid, path, "--jwks", jku)
	})
	t.Run("one byte of the description changed", func(t *testing.T) {
		wantJSRejected(t, "the fixture card with its description changed", srv.URL+"/description-changed.json")
	})
	t.Run("signed over the 0.3 members too", func(t *testing.T) {
		// The SDK rebuilds the payload from the 1.0 members only, so a
		// signature over the card as served does not verify.
		wantJSRejected(t, "the fixture card signed as served", srv.URL+"/signed-as-served.json")
	})
	t.Run("0.3 url changed is not covered", func(t *testing.T) {
		// The SDK's documented limit: members outside the 1.0 schema are
		// not covered. A one-byte test must change a 1.0 member.
		wantJSVerified(t, "the fixture card with its 0.3 url changed", kid, srv.URL+"/url-changed.json")
	})
	t.Run("unreadable card", func(t *testing.T) {
		if code, out := jsVerify(t, srv.URL+"/missing.json"); code != 2 {
			t.Fatalf("a missing card: exit %d, want 2; output:\n%s", code, out)
		}
	})
}

// fixtureCard10 holds the A2A 1.0 members of the fixture card, none of them
// empty: the spec's payload and the SDK's are the same text for it.
const fixtureCard10 = `{
  "name": "Handoff Fixture Agent",
  "description": "A card signed by the e2e test, not by Handoff.",
  "version": "0.1.0",
  "supportedInterfaces": [
    {"url": "http://127.0.0.1:1/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    {"url": "http://127.0.0.1:1/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    {"url": "http://127.0.0.1:1", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
    {"url": "http://127.0.0.1:1/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
  ],
  "provider": {"organization": "Handoff", "url": "https://example.org"},
  "capabilities": {"streaming": true},
  "securitySchemes": {
    "apiKey": {"apiKeySecurityScheme": {"description": "An API key.", "location": "header", "name": "X-API-Key"}},
    "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
  },
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"],
  "skills": [
    {"id": "tck", "name": "Conformance behaviour", "description": "Echoes.", "tags": ["tck", "echo"], "examples": ["hello"]}
  ]
}`

// fixtureCardExtras is merged into the served card: the 0.3 members, the
// 0.3 shape of each security scheme beside its 1.0 member, and empty
// values (an anonymous security requirement, a2a-go's bare scope lists, an
// empty icon URL), as a2a-go and Handoff write them.
const fixtureCardExtras = `{
  "url": "http://127.0.0.1:1/a2a/jsonrpc",
  "preferredTransport": "JSONRPC",
  "protocolVersion": "0.3",
  "additionalInterfaces": [{"url": "http://127.0.0.1:1/a2a/rest", "transport": "HTTP+JSON"}],
  "security": [{"apiKey": []}, {"bearer": []}, {}],
  "securityRequirements": [{"schemes": {"apiKey": []}}, {"schemes": {"bearer": []}}, {"schemes": {}}],
  "securitySchemes": {
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "An API key.",
               "apiKey": {"description": "An API key.", "location": "header", "name": "X-API-Key"}},
    "bearer": {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT",
               "http": {"scheme": "Bearer", "bearerFormat": "JWT"}}
  },
  "iconUrl": ""
}`

func parseJSONObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deepMerge adds src's members to dst, merging objects member by member;
// any other value of src replaces dst's.
func deepMerge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		d, dok := dst[k].(map[string]any)
		s, sok := v.(map[string]any)
		if dok && sok {
			dst[k] = deepMerge(d, s)
		} else {
			dst[k] = v
		}
	}
	return dst
}

// fixtureJCS is the RFC 8785 form of a fixture value, without
// "signatures". It covers what the fixtures hold (objects, arrays, ASCII
// strings, booleans, null), where JCS is json.Marshal's compact output with
// keys sorted and no HTML escaping; anything else fails the test.
func fixtureJCS(t *testing.T, card map[string]any) []byte {
	t.Helper()
	c := maps.Clone(card)
	delete(c, "signatures")
	var check func(v any)
	check = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				check(k)
				check(v[k])
			}
		case []any:
			for _, e := range v {
				check(e)
			}
		case string:
			for _, r := range v {
				if r < 0x20 || r > 0x7e {
					t.Fatalf("fixtureJCS: %q is not printable ASCII", v)
				}
			}
		case bool, nil:
		default:
			t.Fatalf("fixtureJCS: %T is not supported", v)
		}
	}
	check(c)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
