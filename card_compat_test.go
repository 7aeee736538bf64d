package handoff

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/handoff-a2a/handoff/agentcard"
)

// TestCardForms serves the card both ways: by default with the 0.3 members
// 0.3 clients read (url, preferredTransport, additionalInterfaces,
// protocolVersion) beside the 1.0 ones, and with card.compat_03: false as
// the pure 1.0 form, which a strict reader of the 1.0 AgentCard message
// (protojson, unknown members refused) accepts. Both verify.
func TestCardForms(t *testing.T) {
	compat03 := []string{"url", "preferredTransport", "additionalInterfaces", "protocolVersion"}
	for _, tc := range []struct {
		name   string
		extra  string
		compat bool
	}{
		{"default", "", true},
		{"compat_03 true", "card: {compat_03: true}\n", true},
		{"compat_03 false", "card: {compat_03: false}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("test.yaml", strings.NewReader(minimalConfig+tc.extra+"log: {level: error}\n"))
			if err != nil {
				t.Fatal(err)
			}
			c.DataDir = t.TempDir()
			url := startAgent(t, c)
			resp, err := http.Get(url + "/.well-known/agent-card.json")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var members map[string]json.RawMessage
			if err := json.Unmarshal(body, &members); err != nil {
				t.Fatal(err)
			}
			for _, m := range compat03 {
				if _, ok := members[m]; ok != tc.compat {
					t.Errorf("member %q served: %t, want %t", m, ok, tc.compat)
				}
			}
			strictErr := protojson.UnmarshalOptions{}.Unmarshal(body, &a2apb.AgentCard{})
			if tc.compat == (strictErr == nil) {
				t.Errorf("strict 1.0 parse: %v; want it to fail only with the 0.3 members", strictErr)
			}
			card, err := agentcard.ParseCard(body)
			if err != nil {
				t.Fatal(err)
			}
			v, err := agentcard.NewVerifier(agentcard.TrustPolicy{JKUPrefixes: []string{url + "/.well-known/"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(t.Context(), card); err != nil {
				t.Errorf("the served card does not verify: %v", err)
			}
		})
	}
}
