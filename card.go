package handoff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/delegation"
)

// Paths of the transports under the agent's base URL.
const (
	pathJSONRPC = "/a2a/jsonrpc"
	pathREST    = "/a2a/rest"
)

// buildCard makes the agent's public card for the given base URL: every
// binding for A2A 1.0, and JSON-RPC and REST again for 0.3 (the 0.3 members
// a2av0 adds beside them come from those entries).
func buildCard(c *Config, base string) *a2a.AgentCard {
	base = strings.TrimSuffix(base, "/")
	card := &a2a.AgentCard{
		Name:        c.Name,
		Description: c.Description,
		Version:     c.Version,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: base + pathJSONRPC, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
			{URL: base + pathREST, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2a.Version},
			{URL: base, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: a2a.Version},
			{URL: base + pathJSONRPC, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version},
			{URL: base + pathREST, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: a2av0.Version},
		},
		Capabilities: a2a.AgentCapabilities{
			Streaming:         *c.Capabilities.Streaming,
			PushNotifications: c.Capabilities.PushNotifications,
			ExtendedAgentCard: c.ExtendedCard != nil,
		},
		DefaultInputModes:  c.DefaultInputModes,
		DefaultOutputModes: c.DefaultOutputModes,
		DocumentationURL:   c.DocumentationURL,
	}
	if c.Provider != nil {
		card.Provider = &a2a.AgentProvider{Org: c.Provider.Organization, URL: c.Provider.URL}
	}
	// Delegated tasks arrive with Handoff's envelope, which this agent enforces.
	card.Capabilities.Extensions = append(card.Capabilities.Extensions, delegation.ExtensionDeclaration())
	if c.Capabilities.PushNotifications {
		card.Capabilities.Extensions = append(card.Capabilities.Extensions, pushExtension(base+pathJWKS))
	}
	card.SecuritySchemes, card.SecurityRequirements = securitySchemes(&c.Auth)
	card.Skills = skills(c.Skills)
	return card
}

func skills(cs []SkillConfig) []a2a.AgentSkill {
	out := []a2a.AgentSkill{}
	for _, s := range cs {
		tags := s.Tags
		if tags == nil {
			tags = []string{}
		}
		out = append(out, a2a.AgentSkill{
			ID: s.ID, Name: s.Name, Description: s.Description, Tags: tags,
			Examples: s.Examples, InputModes: s.InputModes, OutputModes: s.OutputModes,
		})
	}
	return out
}

// buildExtendedCard is the public card plus what extended_card adds; nil
// when the config has none.
func buildExtendedCard(c *Config, public *a2a.AgentCard) *a2a.AgentCard {
	if c.ExtendedCard == nil {
		return nil
	}
	ext := *public
	if c.ExtendedCard.Description != "" {
		ext.Description = c.ExtendedCard.Description
	}
	ext.Skills = append(append([]a2a.AgentSkill{}, public.Skills...), skills(c.ExtendedCard.Skills)...)
	return &ext
}

// CardSettings chooses the form the card at /.well-known/agent-card.json is
// served in. Either form is signed over the same A2A 1.0 members.
type CardSettings struct {
	// Compat03 serves the 0.3 members (url, preferredTransport,
	// additionalInterfaces, protocolVersion) beside the 1.0 ones: 0.3
	// clients (@a2a-js/sdk 0.3, a2a-python 0.3, a2a-go's a2av0) find the
	// agent's endpoint only there. False serves the pure 1.0 form, which
	// strict 1.0 validators need (they refuse unknown members). Default true.
	Compat03 *bool `yaml:"compat_03"`
}

// compat03 reports whether the card is served with its 0.3 members.
func (s CardSettings) compat03() bool { return s.Compat03 == nil || *s.Compat03 }

// cardJSON is the card as served: the A2A 1.0 members, plus, with compat03,
// the 0.3 members a2av0 adds for 0.3 clients. Security schemes share one key in both
// versions, so each scheme carries both shapes: 0.3 readers look at "type",
// 1.0 readers at the one "…SecurityScheme" member, and each ignores the other.
func cardJSON(ctx context.Context, card *a2a.AgentCard, compat03 bool) ([]byte, error) {
	if !compat03 {
		b, err := json.MarshalIndent(card, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode card: %w", err)
		}
		return b, nil
	}
	producer, ok := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer)
	if !ok {
		return nil, fmt.Errorf("a2av0 card producer has no JSON form")
	}
	compat, err := producer.CardJSON(ctx)
	if err != nil {
		return nil, fmt.Errorf("encode card: %w", err)
	}
	if len(card.SecuritySchemes) == 0 {
		return compat, nil
	}
	var union map[string]any
	if err := json.Unmarshal(compat, &union); err != nil {
		return nil, fmt.Errorf("encode card: %w", err)
	}
	v10, err := json.Marshal(card.SecuritySchemes)
	if err != nil {
		return nil, fmt.Errorf("encode card security schemes: %w", err)
	}
	var schemes10 map[string]map[string]any
	if err := json.Unmarshal(v10, &schemes10); err != nil {
		return nil, fmt.Errorf("encode card security schemes: %w", err)
	}
	schemes, _ := union["securitySchemes"].(map[string]any)
	for name, s10 := range schemes10 {
		s, _ := schemes[name].(map[string]any)
		if s == nil {
			continue
		}
		for k, v := range s10 {
			s[k] = v
		}
	}
	return json.MarshalIndent(union, "", "  ")
}

// staticJSON serves fixed JSON bytes (the card, the JWKS) with an ETag, a
// Last-Modified and a short public cache lifetime; http.ServeContent answers
// If-None-Match, If-Modified-Since and HEAD. Last-Modified is when this
// handler was built (start or reload): replicas built at other moments give
// other dates for the same bytes, which costs at most a full answer, since
// the ETag (from the bytes) takes precedence when a client sends both.
func staticJSON(body []byte, maxAge time.Duration) http.Handler {
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	cacheControl := fmt.Sprintf("public, max-age=%d", int(maxAge.Seconds()))
	modified := time.Now().UTC().Truncate(time.Second)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*") // public documents, meant for any origin
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "If-None-Match, If-Modified-Since")
			w.WriteHeader(http.StatusNoContent)
			return
		default:
			h.Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("ETag", etag)
		h.Set("Cache-Control", cacheControl)
		h.Set("Content-Type", "application/json")
		http.ServeContent(w, r, "", modified, bytes.NewReader(body))
	})
}
