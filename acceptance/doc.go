// Package acceptance decides whether a peer's completed task may change our state.
//
// A remote "completed" is a claim, not a fact. When a delegated task reaches a terminal state,
// a [Gate] checks the peer's artifacts against the skill's [Contract]: their JSON Schemas, the
// evidence the commit requires, its freshness, and verifiers, local MCP tools whose results
// must satisfy a CEL condition. Only a completion that passes every check is written to the
// [Ledger]; nothing else commits.
//
//	gate, err := acceptance.NewGate(contracts, ledger, tools) // contracts from LoadContract
//	d, err := gate.Decide(ctx, skill, completion)            // Committed, Rejected, Failed, Unknown
//
// The ledger is a file ([OpenBoltLedger]) or, for replicas, Redis ([NewRedisLedger]); both
// also index the outbound delegations by local task ([Delegation], for `handoff delegations`).
//
// # Contracts
//
// A contract is a YAML file, read strictly: an unknown field is an error, and every error
// names the file, the line and the field. CEL conditions, JSON Schemas and JSON pointers are
// compiled when the contract loads, so a bad one stops startup instead of a delegation.
//
//	# The peer must return a provider receipt, observed recently, that our own payments
//	# tool confirms.
//	skill: refund            # the delegated skill's id
//	version: "2026-11-01"    # recorded in every ledger entry
//	artifacts:               # artifact name → JSON Schema of its first data part
//	  receipt:
//	    type: object
//	    required: [provider, receipt_id, amount_cents, observed_at]
//	    properties:
//	      provider: {type: string}
//	      receipt_id: {type: string}
//	      amount_cents: {type: integer, minimum: 1}
//	      observed_at: {type: string}
//	commit_requires:         # RFC 6901 pointers that must be present and non-empty
//	  - artifact: receipt
//	    pointer: /receipt_id
//	freshness:               # an RFC 3339 time no older than max_age (a Go duration)
//	  artifact: receipt
//	  pointer: /observed_at
//	  max_age: 15m
//	verifiers:
//	  - name: provider-confirms
//	    tool: payments.lookup_receipt    # a local MCP tool
//	    arguments:                       # "artifact#/pointer" is taken from the evidence;
//	      id: receipt#/receipt_id        # any other value is passed as written
//	      strict: true
//	    condition: result.status == "settled" && result.amount_cents == evidence.receipt.amount_cents
//
// Each expected artifact is the first data part of the peer's artifact with that name. A
// condition sees result, the tool's structured result, and evidence, a map from artifact name
// to its data; both are JSON values. Empty means null, "", [] or {}; false and 0 are present.
// An argument string containing "#/" is always a reference, and its artifact must be declared.
//
// # Outcomes
//
// Each check gives a [Check] whose Reason may be shown to the peer. The outcome is decided in
// this order:
//
//	remote state failed, rejected or canceled        Failed     (no check runs)
//	artifact breaks its schema or is not JSON        Rejected
//	observed_at older than max_age, in the future,
//	  or not an RFC 3339 time                        Rejected
//	a verifier's condition is false                  Rejected
//	expected artifact missing (no data part)         Unknown
//	commit_requires field missing or empty           Unknown
//	observed_at or a verifier argument missing       Unknown
//	verifier tool error, or condition cannot be
//	  evaluated (missing field, not a bool, cost)    Unknown
//	every check passed                               Committed  (ledger entry written)
//
// A contradiction beats missing evidence, because waiting will not change it; once one is
// found, verifiers are not run. Unknown is decided again later: the caller waits [Backoff]
// and calls [Gate.Decide] with the next Attempt, until [Decision.Settle] says the Unknown is
// final ([WithMaxReverify]). An error from Decide means no decision was made at all.
package acceptance
