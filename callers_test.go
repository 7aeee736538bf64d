package handoff

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// twoCallers is an agent with one API-key caller and one JWT issuer, and a
// signer for that issuer's tokens.
type twoCallers struct {
	url   string
	key   string
	token func(sub string, exp time.Time, signer jose.Signer) string
	good  jose.Signer
	forge jose.Signer
}

func newSigner(t *testing.T, kid string) (jose.Signer, jose.JSONWebKey) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: priv, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: "EdDSA"}
}

func startTwoCallers(t *testing.T) twoCallers {
	good, pub := newSigner(t, "idp-1")
	forge, _ := newSigner(t, "idp-1")
	dir := t.TempDir()
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{pub}})
	jwksPath := filepath.Join(dir, "idp.jwks")
	if err := os.WriteFile(jwksPath, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`name: A
description: B
skills: [{id: s, name: S, executor: tck}]
capabilities: {push_notifications: true}
push: {allow_hosts: [127.0.0.1]}
log: {level: error}
limits: {shutdown_grace: 1s}
extended_card: {description: more}
auth:
  api_keys: [{name: ci, sha256: %s}]
  jwt_issuers: [{issuer: "https://idp.test", audience: agent-a, jwks_file: %q}]
`, auth.HashAPIKey("s3cret"), jwksPath)
	c, err := ParseConfig("two.yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = dir
	return twoCallers{
		url: startAgent(t, c), key: "s3cret", good: good, forge: forge,
		token: func(sub string, exp time.Time, s jose.Signer) string {
			tok, err := jwt.Signed(s).Claims(jwt.Claims{Issuer: "https://idp.test", Subject: sub,
				Audience: jwt.Audience{"agent-a"}, Expiry: jwt.NewNumericDate(exp)}).Serialize()
			if err != nil {
				t.Fatal(err)
			}
			return tok
		},
	}
}

// call posts one A2A 1.0 JSON-RPC request with the given credential header.
func call(t *testing.T, url, header, value, method, params string) (int, map[string]any) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", url+pathJSONRPC, strings.NewReader(body))
	req.Header.Set("A2A-Version", "1.0")
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") { // the first event decides
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(d)
				break
			}
		}
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: not JSON: %s", method, b)
	}
	return resp.StatusCode, out
}

func TestCallersAreKeptApart(t *testing.T) {
	a := startTwoCallers(t)
	bearer := "Bearer " + a.token("alice", time.Now().Add(time.Hour), a.good)
	keyH, jwtH := "X-API-Key", "Authorization"
	send := `{"message":{"messageId":"tck-input-required-1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`

	_, out := call(t, a.url, keyH, a.key, "SendMessage", send)
	keyTask := out["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	_, out = call(t, a.url, jwtH, bearer, "SendMessage", send)
	jwtTask := out["result"].(map[string]any)["task"].(map[string]any)["id"].(string)
	if _, out := call(t, a.url, keyH, a.key, "CreateTaskPushNotificationConfig",
		fmt.Sprintf(`{"taskId":%q,"id":"p","url":"http://127.0.0.1:9/x"}`, keyTask)); out["result"] == nil {
		t.Fatalf("owner creates a push config: %v", out)
	}

	for _, c := range []struct{ name, header, value, mine, theirs string }{
		{"api key", keyH, a.key, keyTask, jwtTask},
		{"jwt", jwtH, bearer, jwtTask, keyTask},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, m := range []struct{ method, params string }{
				{"GetTask", fmt.Sprintf(`{"id":%q}`, c.theirs)},
				{"CancelTask", fmt.Sprintf(`{"id":%q}`, c.theirs)},
				{"SubscribeToTask", fmt.Sprintf(`{"id":%q}`, c.theirs)},
				{"SendMessage", fmt.Sprintf(`{"message":{"messageId":"m2","taskId":%q,"role":"ROLE_USER","parts":[{"text":"x"}]}}`, c.theirs)},
				{"ListTaskPushNotificationConfigs", fmt.Sprintf(`{"taskId":%q}`, c.theirs)},
				{"GetTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"id":"p"}`, c.theirs)},
				{"CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"url":"http://127.0.0.1:9/y"}`, c.theirs)},
			} {
				if _, out := call(t, a.url, c.header, c.value, m.method, m.params); errorCode(out) != -32001 {
					t.Errorf("%s on the other's task: %v, want -32001 (as if it did not exist)", m.method, out)
				}
			}
			_, out := call(t, a.url, c.header, c.value, "ListTasks", `{}`)
			tasks := out["result"].(map[string]any)["tasks"].([]any)
			if len(tasks) != 1 || tasks[0].(map[string]any)["id"] != c.mine {
				t.Errorf("ListTasks shows %v, want only %s", tasks, c.mine)
			}
			if _, out := call(t, a.url, c.header, c.value, "GetTask", fmt.Sprintf(`{"id":%q}`, c.mine)); out["result"] == nil {
				t.Errorf("GetTask of own task: %v", out)
			}
			if _, out := call(t, a.url, c.header, c.value, "GetExtendedAgentCard", `{}`); out["result"] == nil {
				t.Errorf("extended card for an authenticated caller: %v", out)
			}
		})
	}

	for name, value := range map[string]string{
		"expired jwt":     "Bearer " + a.token("alice", time.Now().Add(-time.Hour), a.good),
		"wrongly signed":  "Bearer " + a.token("alice", time.Now().Add(time.Hour), a.forge),
		"garbage":         "Bearer x",
		"no credentials":  "",
		"unknown api key": "key:nope",
	} {
		t.Run(name, func(t *testing.T) {
			header := jwtH
			if strings.HasPrefix(value, "key:") {
				header, value = keyH, strings.TrimPrefix(value, "key:")
			}
			if value == "" {
				header = ""
			}
			status, out := call(t, a.url, header, value, "GetTask", fmt.Sprintf(`{"id":%q}`, jwtTask))
			if status != http.StatusUnauthorized || errorCode(out) != -31401 {
				t.Fatalf("status %d, %v", status, out)
			}
		})
	}
	// Another subject of the same issuer is another owner.
	bob := "Bearer " + a.token("bob", time.Now().Add(time.Hour), a.good)
	if _, out := call(t, a.url, jwtH, bob, "GetTask", fmt.Sprintf(`{"id":%q}`, jwtTask)); errorCode(out) != -32001 {
		t.Fatalf("bob reads alice's task: %v", out)
	}
}

// TestGRPCBindingNeedsCredentials: the connect (gRPC, gRPC-Web, Connect)
// binding refuses in its own protocol too.
func TestGRPCBindingNeedsCredentials(t *testing.T) {
	a := startTwoCallers(t)
	post := func(header, value string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", a.url+"/lf.a2a.v1.A2AService/ListTasks", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json") // the Connect protocol, unary, JSON
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := post("", ""); status != http.StatusUnauthorized || !strings.Contains(body, `"unauthenticated"`) {
		t.Fatalf("without credentials: %d %s", status, body)
	}
	if status, body := post("X-API-Key", a.key); status != http.StatusOK || !strings.Contains(body, "pageSize") {
		t.Fatalf("with the API key: %d %s", status, body)
	}
}
