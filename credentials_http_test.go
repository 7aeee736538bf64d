package handoff

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// TestValidKeyWithBadBearerIsRefused: over HTTP, a request with a valid
// API key and a bearer token that does not verify is answered 401, on
// every binding, not served as the key's caller.
func TestValidKeyWithBadBearerIsRefused(t *testing.T) {
	c, err := ParseConfig("creds.yaml", strings.NewReader(fmt.Sprintf(`name: A
description: B
log: {level: error}
auth: {api_keys: [{name: ci, sha256: %s}]}
skills: [{id: s, name: S, executor: tck}]
`, auth.HashAPIKey("k3y"))))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", pathJSONRPC, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`},
		{"GET", pathREST + "/tasks", ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			send := func(bearer string) int {
				req, _ := http.NewRequestWithContext(t.Context(), tc.method, url+tc.path, strings.NewReader(tc.body))
				req.Header.Set("A2A-Version", "1.0")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-API-Key", "k3y")
				if bearer != "" {
					req.Header.Set("Authorization", bearer)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if got := send(""); got != http.StatusOK {
				t.Fatalf("the key alone: status %d, want 200", got)
			}
			if got := send("Bearer not.a.jwt"); got != http.StatusUnauthorized {
				t.Fatalf("the key with a bad bearer token: status %d, want 401", got)
			}
		})
	}
}
