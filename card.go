package handoff

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
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
