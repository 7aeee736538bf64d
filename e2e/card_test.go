package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestAgentCard reads the card as raw JSON, the way any client sees it: the
// 1.0 supportedInterfaces for JSON-RPC, HTTP+JSON and gRPC at this agent's
// address, plus the 0.3 members a 0.3 client needs.
func TestAgentCard(t *testing.T) {
	ag := startAgent(t, agentConfig{})
	status, body, err := httpGet(callCtx(t), ag.base+"/.well-known/agent-card.json")
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET the card: status %d, error %v, body %q", status, err, body)
	}
	type iface struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	var card struct {
		Name                string  `json:"name"`
		SupportedInterfaces []iface `json:"supportedInterfaces"`
		Capabilities        struct {
			Streaming bool `json:"streaming"`
		} `json:"capabilities"`
		Skills []struct {
			ID string `json:"id"`
		} `json:"skills"`
		// The 0.3 members.
		URL                  string `json:"url"`
		PreferredTransport   string `json:"preferredTransport"`
		ProtocolVersion      string `json:"protocolVersion"`
		AdditionalInterfaces []struct {
			URL       string `json:"url"`
			Transport string `json:"transport"`
		} `json:"additionalInterfaces"`
	}
	if err := json.Unmarshal([]byte(body), &card); err != nil {
		t.Fatalf("the card is not JSON: %v: %s", err, body)
	}
	if card.Name != "Handoff Conformance Agent" || !card.Capabilities.Streaming || len(card.Skills) != 1 || card.Skills[0].ID != "tck" {
		t.Fatalf("card name %q, streaming %v, skills %+v; want the conformance agent's", card.Name, card.Capabilities.Streaming, card.Skills)
	}

	has := func(want iface) bool {
		for _, got := range card.SupportedInterfaces {
			if got == want {
				return true
			}
		}
		return false
	}
	for _, want := range []iface{
		{ag.base + "/a2a/jsonrpc", "JSONRPC", "1.0"},
		{ag.base + "/a2a/rest", "HTTP+JSON", "1.0"},
		{ag.base, "GRPC", "1.0"},
		{ag.base + "/a2a/jsonrpc", "JSONRPC", "0.3"},
		{ag.base + "/a2a/rest", "HTTP+JSON", "0.3"},
	} {
		if !has(want) {
			t.Errorf("supportedInterfaces lacks %+v; got %+v", want, card.SupportedInterfaces)
		}
	}

	if card.URL != ag.base+"/a2a/jsonrpc" || card.PreferredTransport != "JSONRPC" || card.ProtocolVersion != "0.3" {
		t.Errorf("0.3 members: url %q, preferredTransport %q, protocolVersion %q; want %q, JSONRPC, 0.3",
			card.URL, card.PreferredTransport, card.ProtocolVersion, ag.base+"/a2a/jsonrpc")
	}
	if len(card.AdditionalInterfaces) != 1 || card.AdditionalInterfaces[0].URL != ag.base+"/a2a/rest" || card.AdditionalInterfaces[0].Transport != "HTTP+JSON" {
		t.Errorf("0.3 additionalInterfaces = %+v, want the REST one at %s", card.AdditionalInterfaces, ag.base+"/a2a/rest")
	}
}
