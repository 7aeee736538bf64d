package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// getAgentJSON GETs one of the agent's own JSON endpoints (push status,
// audit, delegations, ledger) with the caller's credentials and decodes the
// answer into out.
func getAgentJSON(ctx context.Context, raw, path string, query url.Values, o *outputFlags, out any) error {
	base, err := parseAgentURL(raw)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	// The card names the API key's header, and --trust checks the card; a
	// bearer token alone needs no card.
	var card *a2a.AgentCard
	if o.apiKey != "" || o.trust != "" {
		if card, err = resolveCard(ctx, base, o); err != nil {
			return err
		}
	}
	u := base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header = credentialHeaders(card, o)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("HTTP %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode the answer of %s: %w", u.Redacted(), err)
	}
	return nil
}
