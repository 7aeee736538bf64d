package delegation_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/delegation"
)

func TestRecordRoundTrip(t *testing.T) {
	in := &delegation.Record{Peer: "payments", CardDigest: "sha256:ab", RemoteTaskID: "r1", RemoteContextID: "c1",
		IdempotencyKey: "k1", Deadline: time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC), EventsSeen: 3,
		RemoteState: a2a.TaskStateCompleted, GateAttempts: 2, Outcome: "committed"}
	out, ok, err := delegation.RecordFrom(in.Metadata())
	if err != nil || !ok {
		t.Fatalf("RecordFrom: %v %v", ok, err)
	}
	if *out != *in {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
	if _, ok, err := delegation.RecordFrom(map[string]any{"other": 1}); ok || err != nil {
		t.Fatalf("no record: %v %v", ok, err)
	}
}

func TestRecordMalformed(t *testing.T) {
	for name, raw := range map[string]any{
		"not an object": "x",
		"no peer":       map[string]any{"idempotencyKey": "k", "deadline": "2030-01-01T00:00:00Z"},
		"no key":        map[string]any{"peer": "p", "deadline": "2030-01-01T00:00:00Z"},
		"no deadline":   map[string]any{"peer": "p", "idempotencyKey": "k"},
		"bad deadline":  map[string]any{"peer": "p", "idempotencyKey": "k", "deadline": "soon"},
		"unknown field": map[string]any{"peer": "p", "idempotencyKey": "k", "deadline": "2030-01-01T00:00:00Z", "extra": true},
		"negative":      map[string]any{"peer": "p", "idempotencyKey": "k", "deadline": "2030-01-01T00:00:00Z", "eventsSeen": -1},
		"negative gate": map[string]any{"peer": "p", "idempotencyKey": "k", "deadline": "2030-01-01T00:00:00Z", "gateAttempts": -2},
	} {
		t.Run(name, func(t *testing.T) {
			_, ok, err := delegation.RecordFrom(map[string]any{delegation.RecordKey: raw})
			if !ok || !errors.Is(err, delegation.ErrMalformedRecord) {
				t.Fatalf("got %v %v, want ErrMalformedRecord", ok, err)
			}
		})
	}
}

// FuzzRecord: a stored record never panics the reader, and whatever it
// accepts reads back the same after a re-encode.
func FuzzRecord(f *testing.F) {
	f.Add(`{"peer":"p","idempotencyKey":"k","deadline":"2030-01-01T00:00:00Z"}`)
	f.Add(`{"peer":"p","remoteTaskId":"r","remoteContextId":"c","idempotencyKey":"k","deadline":"2030-01-01T00:00:00Z","eventsSeen":2,"remoteState":"TASK_STATE_WORKING","outcome":"unknown"}`)
	f.Add(`{"peer":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		var raw any
		if json.Unmarshal([]byte(s), &raw) != nil {
			return
		}
		r, ok, err := delegation.RecordFrom(map[string]any{delegation.RecordKey: raw})
		if !ok {
			t.Fatal("a present record reported absent")
		}
		if err != nil {
			return
		}
		again, _, err := delegation.RecordFrom(r.Metadata())
		if err != nil || !again.Deadline.Equal(r.Deadline) || again.Peer != r.Peer || again.IdempotencyKey != r.IdempotencyKey || again.RemoteTaskID != r.RemoteTaskID {
			t.Fatalf("re-encoded record %+v reads back as %+v (%v)", r, again, err)
		}
	})
}
