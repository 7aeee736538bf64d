package e2e

import (
	"testing"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
)

// cardDigestAt fetches the card the agent at base serves and returns its
// delegation.CardDigest: the identity its provenance hops carry.
func cardDigestAt(t *testing.T, base string) string {
	t.Helper()
	code, body, err := httpGet(callCtx(t), base+"/.well-known/agent-card.json")
	if err != nil || code != 200 {
		t.Fatalf("fetch the card at %s: %d %v", base, code, err)
	}
	card, err := agentcard.ParseCard([]byte(body))
	if err != nil {
		t.Fatalf("the card at %s: %v", base, err)
	}
	d, err := delegation.CardDigest(card)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
