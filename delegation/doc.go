// Package delegation hands tasks to verified peers and carries the envelope
// that bounds what they may do with them.
//
// # Peers
//
// A [Directory] holds the configured peers ([PeerConfig]: a name, a base URL
// and an [agentcard.TrustPolicy]). [Directory.Refresh] fetches each peer's
// card from BASE/.well-known/agent-card.json (size-limited, revalidated with
// its ETag), parses it with [agentcard.ParseCard] and verifies its signature.
// Each peer is then verified, refused (with the reason) or unreachable
// ([PeerStatus]). Only verified peers offer skills: a card that stops
// verifying, because it was changed or re-signed by a key outside the trust
// rule, takes its peer's skills out of the directory until it verifies again.
//
//	dir, err := delegation.NewDirectory(peers)
//	err = dir.Refresh(ctx)
//	peer, ok := dir.ForSkill("refund", "payments")
//	iface := delegation.BestInterface(peer.Card) // JSON-RPC, HTTP+JSON, then gRPC
//
// # The envelope
//
// An [Envelope] travels in message metadata under [EnvelopeExtension]: who
// the work is for (actor, tenant), what they authorised (scopes), the agents
// it passed through (provenance, each with its [CardDigest]), a deadline, an
// idempotency key and a hop count. The sender forwards it with
// [Envelope.Next] and [Envelope.Attach]; the receiver reads it with
// [EnvelopeFrom] and enforces it with [Check] before executing anything.
//
//	env.Next(self).Attach(msg)                          // sender
//	e, ok, err := delegation.EnvelopeFrom(msg)          // receiver
//	err = delegation.Check(e, self, policy, time.Now()) // ErrHopLimit, ErrCycle, ...
package delegation
