package handoff

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
)

// NewPeerDirectory builds the directory of the config's peers, each with
// its trust rule. Call Refresh on it to fetch and verify their cards; pass
// [delegation.WithLogger] for the operator to hear of a refused peer.
func NewPeerDirectory(c *Config, opts ...delegation.Option) (*delegation.Directory, error) {
	var peers []delegation.PeerConfig
	for _, p := range c.Peers {
		policy := agentcard.TrustPolicy{JKUPrefixes: p.Trust.JKUPrefixes}
		if p.Trust.JWKSFile != "" {
			b, err := os.ReadFile(p.Trust.JWKSFile)
			if err != nil {
				return nil, fmt.Errorf("%s: peer %s: %w", c.path, p.Name, err)
			}
			var set jose.JSONWebKeySet
			if err := json.Unmarshal(b, &set); err != nil {
				return nil, fmt.Errorf("%s: peer %s: %s is not a JWKS: %w", c.path, p.Name, p.Trust.JWKSFile, err)
			}
			for _, k := range set.Keys {
				if len(p.Trust.KeyIDs) == 0 || slices.Contains(p.Trust.KeyIDs, k.KeyID) {
					policy.Keys.Keys = append(policy.Keys.Keys, k)
				}
			}
		}
		peers = append(peers, delegation.PeerConfig{Name: p.Name, BaseURL: p.URL, Trust: policy})
	}
	d, err := delegation.NewDirectory(peers, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: peers: %w", c.path, err)
	}
	return d, nil
}
