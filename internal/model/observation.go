package model

import (
	"encoding/json"
	"unicode/utf8"
)

// An Observation's Status: the call ended well, or not (ErrorClass says how).
const (
	ObservationSuccess = "success"
	ObservationError   = "error"
)

// Error classes the loop itself gives; the caller's pipeline adds its own (permission_denied,
// timeout, tool_error, ...).
const (
	ClassUnavailableTool  = "unavailable_tool"
	ClassValidationFailed = "validation_failed"
	ClassLimitExceeded    = "limit_exceeded"
	ClassNotRun           = "not_run"
)

// Observation is what the model sees of a call: a normalised result, never the raw payload.
type Observation struct {
	// Status is [ObservationSuccess] or [ObservationError].
	Status string `json:"status"`
	// Output is the structured result (or its text as a JSON string).
	Output json.RawMessage `json:"output,omitempty"`
	// ErrorClass says why a call did not succeed: one of the loop's Class* values, or the
	// pipeline's outcome (permission_denied, timeout, tool_error, ...); empty on success.
	ErrorClass string `json:"error_class,omitempty"`
	// Error is a message safe to show the model.
	Error string `json:"error,omitempty"`
	// Truncated: Output (then Error) was cut to fit the observation limit.
	Truncated bool `json:"truncated,omitempty"`
	// ArtifactRef points at the full result the caller kept, when Output is not all of it.
	ArtifactRef string `json:"artifact_ref,omitempty"`
}

// refusal is the loop's own error observation.
func refusal(class, msg string) Observation {
	return Observation{Status: ObservationError, ErrorClass: class, Error: msg}
}

// DefaultObservationLimit bounds a rendered observation, in bytes.
const DefaultObservationLimit = 8 << 10

// normalise returns o cut to fit limit bytes once rendered: the output becomes a JSON string
// holding the output's first bytes and Truncated is set. The error message is cut last.
func normalise(o Observation, limit int) (Observation, string) {
	b, err := json.Marshal(o)
	if err != nil { // Output is not valid JSON: keep it as text
		o.Output, _ = json.Marshal(string(o.Output))
		b, _ = json.Marshal(o)
	}
	if len(b) <= limit {
		return o, string(b)
	}
	o.Truncated = true
	over := len(b) - limit + 64 // room for the quoting the cut text adds
	if len(o.Output) > 0 {
		keep := max(0, len(o.Output)-over)
		o.Output, _ = json.Marshal(cutUTF8(string(o.Output), keep))
	}
	for range 4 { // quoting can grow the output; a few passes settle it
		if b, _ = json.Marshal(o); len(b) <= limit {
			return o, string(b)
		}
		over = len(b) - limit
		if len(o.Output) > 2 {
			var s string
			_ = json.Unmarshal(o.Output, &s)
			o.Output, _ = json.Marshal(cutUTF8(s, max(0, len(s)-over-8)))
		} else {
			o.Output = nil
			o.Error = cutUTF8(o.Error, max(0, len(o.Error)-over-8))
		}
	}
	o.Output, o.Error = nil, ""
	b, _ = json.Marshal(o)
	return o, string(b)
}

// cutUTF8 returns at most n bytes of s, not splitting a rune.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
