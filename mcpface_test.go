package handoff

import (
	"net/http"
	"strings"
	"testing"
)

// TestMCPFaceHosts: on a loopback listener the MCP face takes loopback
// hosts and the host of public_url (a reverse proxy on the same machine
// forwards that Host), and refuses any other (DNS rebinding).
func TestMCPFaceHosts(t *testing.T) {
	c, err := ParseConfig("face.yaml", strings.NewReader(minimalConfig+"public_url: https://agents.example.com/face\nmcp_server: {enabled: true}\nlog: {level: error}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c.DataDir = t.TempDir()
	url := startAgent(t, c)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		host string
		want int
	}{
		{"", http.StatusOK}, // the listener's own address
		{"localhost:8080", http.StatusOK},
		{"agents.example.com", http.StatusOK},
		{"AGENTS.example.com:443", http.StatusOK},
		{"evil.example", http.StatusForbidden},
		{"agents.example.com.evil.example", http.StatusForbidden},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.host != "" {
			req.Host = tc.host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q: %d, want %d", tc.host, resp.StatusCode, tc.want)
		}
	}
}
