package delegation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// RecordKey is the task metadata key under which a delegating task keeps
// its [Record]. The record travels in the task's own event log (a status
// update's metadata merges into the task's), so every task store keeps it
// and a restarted agent finds it in the task's snapshot.
const RecordKey = "handoff/delegation"

// A Record is the durable state of one outbound delegation: enough to
// follow the peer's task again after a restart, or to send the same
// request again without starting a second remote task.
type Record struct {
	// Peer is the peer's name in the config.
	Peer string `json:"peer"`
	// CardDigest is the [CardDigest] of the peer's card when it was chosen.
	CardDigest string `json:"cardDigest,omitempty"`
	// RemoteTaskID is the peer's task id, once it answered.
	RemoteTaskID string `json:"remoteTaskId,omitempty"`
	// RemoteContextID is the peer task's context id, once it answered.
	RemoteContextID string `json:"remoteContextId,omitempty"`
	// IdempotencyKey is the envelope's key: a repeat finds the task it started.
	IdempotencyKey string `json:"idempotencyKey"`
	// Deadline is the envelope's deadline.
	Deadline time.Time `json:"deadline"`
	// EventsSeen counts the peer's events followed so far.
	EventsSeen int `json:"eventsSeen,omitempty"`
	// RemoteState is the peer task's last known state.
	RemoteState a2a.TaskState `json:"remoteState,omitempty"`
	// GateAttempts counts the gate's unknown decisions already re-checked,
	// so that the re-verification bound holds across restarts.
	GateAttempts int `json:"gateAttempts,omitempty"`
	// Outcome is the acceptance gate's decision, once made, or "failed" when
	// the delegation ended without one.
	Outcome string `json:"outcome,omitempty"`
	// Reason says why a delegation that did not commit ended as it did.
	Reason string `json:"reason,omitempty"`
}

// Metadata returns the record as task metadata (plain JSON values, as
// after a trip through any store or transport).
func (r *Record) Metadata() map[string]any {
	// Neither call can fail: Record holds strings, ints and a time.
	b, _ := json.Marshal(r)
	var plain map[string]any
	_ = json.Unmarshal(b, &plain)
	return map[string]any{RecordKey: plain}
}

// RecordFrom reads the record in a task's metadata. It reports whether one
// is present; a present one that is not well formed (no peer, no key, no
// deadline, or members of the wrong type or unknown) is an error wrapping
// [ErrMalformedRecord].
func RecordFrom(meta map[string]any) (*Record, bool, error) {
	raw, ok := meta[RecordKey]
	if !ok {
		return nil, false, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrMalformedRecord, err)
	}
	return parseRecord(b)
}

func parseRecord(b []byte) (*Record, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, true, fmt.Errorf("%w: %v", ErrMalformedRecord, err)
	}
	switch {
	case r.Peer == "":
		return nil, true, fmt.Errorf("%w: peer is required", ErrMalformedRecord)
	case r.IdempotencyKey == "":
		return nil, true, fmt.Errorf("%w: idempotencyKey is required", ErrMalformedRecord)
	case r.Deadline.IsZero():
		return nil, true, fmt.Errorf("%w: deadline is required", ErrMalformedRecord)
	case r.EventsSeen < 0:
		return nil, true, fmt.Errorf("%w: eventsSeen is negative", ErrMalformedRecord)
	case r.GateAttempts < 0:
		return nil, true, fmt.Errorf("%w: gateAttempts is negative", ErrMalformedRecord)
	}
	return &r, true, nil
}
