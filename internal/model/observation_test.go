package model

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNormaliseTruncates(t *testing.T) {
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("é", 5000)})
	for _, tc := range []struct {
		name string
		o    Observation
	}{
		{"small", Observation{Status: ObservationSuccess, Output: json.RawMessage(`{"a":1}`)}},
		{"big output", Observation{Status: ObservationSuccess, Output: big, ArtifactRef: "artifact://x"}},
		{"big error", Observation{Status: ObservationError, ErrorClass: "tool_error", Error: strings.Repeat("\"quoted\" ", 2000)}},
		{"invalid output", Observation{Status: ObservationSuccess, Output: json.RawMessage(`not json`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 1024
			o, text := normalise(tc.o, limit)
			if len(text) > limit {
				t.Fatalf("rendered %d bytes, limit %d", len(text), limit)
			}
			if !json.Valid([]byte(text)) || !utf8.ValidString(text) {
				t.Fatalf("rendered %q is not valid JSON", text)
			}
			var back Observation
			if err := json.Unmarshal([]byte(text), &back); err != nil || back.Status != tc.o.Status || back.ArtifactRef != tc.o.ArtifactRef {
				t.Fatalf("rendered %q lost its status or reference: %v", text, err)
			}
			if o.Truncated != (tc.name == "big output" || tc.name == "big error") {
				t.Errorf("truncated = %v", o.Truncated)
			}
		})
	}
}
