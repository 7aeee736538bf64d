package acceptance_test

import "github.com/handoff-a2a/handoff/acceptance"

// entry is a committed entry of delegation id, as the ledger tests store it.
func entry(id string) *acceptance.Entry {
	return &acceptance.Entry{
		DelegationID:    id,
		Skill:           "refund",
		ContractVersion: "1",
		EvidenceDigests: map[string]string{"receipt": "ab12"},
		Verifiers:       []acceptance.Check{{Name: "verifier v", Passed: true}},
		CommittedAt:     now,
	}
}

// ids lists the delegation ids of es, for messages.
func ids(es []*acceptance.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.DelegationID)
	}
	return out
}
