package agentcard

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// ParseCard reads a served card: the A2A 1.0 members, with or without the 0.3
// members a2a-go's compatibility layer writes beside them, or a 0.3 card. It
// returns the 1.0 card with its signatures as served; [Verifier.Verify] and
// [CanonicalPayload] work on that form. Security requirement scopes are read
// both as a2a-go writes them (a list) and in their protobuf JSON form
// ({"list": [...]}), which other SDKs write. Failures wrap [ErrMalformed].
func ParseCard(b []byte) (*a2a.AgentCard, error) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("parse card: %w: not a JSON object", ErrMalformed)
	}
	b, err := unwrapScopes(b)
	if err != nil {
		return nil, fmt.Errorf("parse card: %w: %w", ErrMalformed, err)
	}
	card, err := a2av0.NewAgentCardParser()(b)
	if err != nil {
		return nil, fmt.Errorf("parse card: %w: %w", ErrMalformed, err)
	}
	return card, nil
}

// unwrapScopes rewrites {"list": [...]} scopes as the bare lists a2a-go
// decodes, at the card's and each skill's securityRequirements. It returns b
// unchanged when nothing needs rewriting.
func unwrapScopes(b []byte) ([]byte, error) {
	if !bytes.Contains(b, []byte(`"list"`)) {
		return b, nil // the common case, with no decoding
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var card map[string]any
	if err := dec.Decode(&card); err != nil {
		return nil, err
	}
	changed := unwrapReqs(card["securityRequirements"])
	if skills, ok := card["skills"].([]any); ok {
		for _, s := range skills {
			if s, ok := s.(map[string]any); ok {
				changed = unwrapReqs(s["securityRequirements"]) || changed
			}
		}
	}
	if !changed {
		return b, nil
	}
	return json.Marshal(card)
}

func unwrapReqs(reqs any) bool {
	list, ok := reqs.([]any)
	if !ok {
		return false
	}
	changed := false
	for _, r := range list {
		r, ok := r.(map[string]any)
		if !ok {
			continue
		}
		schemes, ok := r["schemes"].(map[string]any)
		if !ok {
			continue
		}
		for name, scopes := range schemes {
			if obj, ok := scopes.(map[string]any); ok {
				schemes[name] = obj["list"] // absent list: no scopes
				changed = true
			}
		}
	}
	return changed
}
