package delegation

import "errors"

// Directory errors, recorded as a [PeerStatus]'s Err.
var (
	// ErrCardTooLarge: the served card is over the size limit ([WithMaxCardBytes]).
	ErrCardTooLarge = errors.New("agent card too large")
	// ErrUnreachable: the card could not be fetched (network error or an
	// HTTP status other than 200, or 304 for a cached card).
	ErrUnreachable = errors.New("peer unreachable")
)

// Receiver refusals. [Check] and [EnvelopeFrom] wrap exactly one of these,
// with the offending value in the message. The messages carry only what the
// caller sent and this agent's limits, so they are safe to return to it.
var (
	// ErrHopLimit: the task has been forwarded more times than the receiver allows.
	ErrHopLimit = errors.New("delegation hop limit exceeded")
	// ErrDeadlinePassed: the envelope's deadline is not after the receiver's clock.
	ErrDeadlinePassed = errors.New("delegation deadline passed")
	// ErrScopeNotGranted: the envelope asks for a scope the receiver does not grant.
	ErrScopeNotGranted = errors.New("delegation scope not granted")
	// ErrCycle: the receiver's card already appears in the provenance chain.
	ErrCycle = errors.New("delegation cycle")
	// ErrMalformedEnvelope: the metadata under [EnvelopeExtension] is not a
	// well-formed envelope.
	ErrMalformedEnvelope = errors.New("malformed delegation envelope")
)

// ErrNoFinalState means the peer's task could not be followed to an end:
// its stream kept breaking and resubscribing did not help.
var ErrNoFinalState = errors.New("the peer's task was not followed to its end")

// errEndedEarly is a stream that ended before the peer's task did.
var errEndedEarly = errors.New("the stream ended before the task did")

// ErrMalformedRecord means the metadata under [RecordKey] is not a record.
var ErrMalformedRecord = errors.New("malformed delegation record")
