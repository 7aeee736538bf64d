package delegation_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/delegation"
)

// refusals are Check's sentinels; each refusal case wants exactly one.
var refusals = []error{
	delegation.ErrHopLimit, delegation.ErrDeadlinePassed, delegation.ErrScopeNotGranted,
	delegation.ErrCycle, delegation.ErrMalformedEnvelope,
}

func wantOnly(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
	for _, s := range refusals {
		if s != want && errors.Is(err, s) {
			t.Fatalf("error %v also matches %v", err, s)
		}
	}
}

var (
	now      = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	frontHop = delegation.Hop{Agent: "front", CardDigest: "sha256:" + hex64('a')}
	payHop   = delegation.Hop{Agent: "payments", CardDigest: "sha256:" + hex64('b')}
)

func hex64(c byte) string { return string(slices.Repeat([]byte{c}, 64)) }

// sampleEnvelope is what the front agent sends the payments agent.
func sampleEnvelope() *delegation.Envelope {
	return (&delegation.Envelope{
		Actor:          "alice",
		Tenant:         "acme",
		Scopes:         []string{"refunds:write"},
		Deadline:       now.Add(time.Hour).In(time.FixedZone("CET", 3600)),
		IdempotencyKey: "refund-123",
	}).Next(frontHop)
}

func sameEnvelope(t *testing.T, got, want *delegation.Envelope) {
	t.Helper()
	if got.Actor != want.Actor || got.Tenant != want.Tenant || !slices.Equal(got.Scopes, want.Scopes) ||
		!slices.Equal(got.Provenance, want.Provenance) || !got.Deadline.Equal(want.Deadline) ||
		got.IdempotencyKey != want.IdempotencyKey || got.Hops != want.Hops {
		t.Fatalf("envelope\n got %+v\nwant %+v", got, want)
	}
}

// overTheWire encodes m as a transport would and decodes it on the other side.
func overTheWire(t *testing.T, m *a2a.Message) *a2a.Message {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out a2a.Message
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestEnvelopeRoundTrip(t *testing.T) {
	want := sampleEnvelope()
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("refund order 123"))
	want.Attach(m)
	want.Attach(m) // attaching again replaces the envelope and lists the extension once
	if !slices.Equal(m.Extensions, []string{delegation.EnvelopeExtension}) {
		t.Errorf("extensions %q", m.Extensions)
	}
	for name, msg := range map[string]*a2a.Message{"in process": m, "over the wire": overTheWire(t, m)} {
		t.Run(name, func(t *testing.T) {
			got, ok, err := delegation.EnvelopeFrom(msg)
			if !ok || err != nil {
				t.Fatalf("EnvelopeFrom: ok %v, err %v", ok, err)
			}
			sameEnvelope(t, got, want)
			if got.Deadline.Location() != time.UTC {
				t.Errorf("deadline in %v, want UTC", got.Deadline.Location())
			}
		})
	}
}

func TestEnvelopeAbsent(t *testing.T) {
	for name, m := range map[string]*a2a.Message{
		"nil message": nil,
		"no metadata": a2a.NewMessage(a2a.MessageRoleUser),
		"other keys":  {Metadata: map[string]any{"https://other.example/ext": map[string]any{"actor": "x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if e, ok, err := delegation.EnvelopeFrom(m); e != nil || ok || err != nil {
				t.Fatalf("EnvelopeFrom = %v, %v, %v; want nothing", e, ok, err)
			}
		})
	}
}

// malformed are envelope metadata values EnvelopeFrom refuses; FuzzEnvelope starts from them too.
var malformed = map[string]string{
	"not an object":       `["alice"]`,
	"null":                `null`,
	"no actor":            `{"hops":1,"provenance":[{"agent":"front"}]}`,
	"unknown member":      `{"actor":"alice","hops":0,"budget":10}`,
	"hops as string":      `{"actor":"alice","hops":"1"}`,
	"hops below chain":    `{"actor":"alice","hops":0,"provenance":[{"agent":"front"}]}`,
	"hop without agent":   `{"actor":"alice","hops":1,"provenance":[{"cardDigest":"sha256:` + hex64('a') + `"}]}`,
	"bad card digest":     `{"actor":"alice","hops":1,"provenance":[{"agent":"front","cardDigest":"md5:00"}]}`,
	"empty scope":         `{"actor":"alice","hops":0,"scopes":[""]}`,
	"deadline not 3339":   `{"actor":"alice","hops":0,"deadline":"tomorrow"}`,
	"deadline before AD1": `{"actor":"alice","hops":0,"deadline":"0001-01-01T00:00:00+01:00"}`,
	"no deadline":         `{"actor":"alice","hops":0}`,
	"zero deadline":       `{"actor":"alice","hops":0,"deadline":"0001-01-01T00:00:00Z"}`,
}

func TestEnvelopeFromMalformed(t *testing.T) {
	for name, raw := range malformed {
		t.Run(name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				t.Fatal(err)
			}
			m := &a2a.Message{Metadata: map[string]any{delegation.EnvelopeExtension: v}}
			e, ok, err := delegation.EnvelopeFrom(m)
			if !ok || e != nil {
				t.Fatalf("EnvelopeFrom = %v, present %v; want present, nil", e, ok)
			}
			wantOnly(t, err, delegation.ErrMalformedEnvelope)
		})
	}
}

func TestNext(t *testing.T) {
	e := sampleEnvelope()
	next := e.Next(payHop)
	if next.Hops != 2 || !slices.Equal(next.Provenance, []delegation.Hop{frontHop, payHop}) {
		t.Fatalf("Next: hops %d, provenance %v", next.Hops, next.Provenance)
	}
	if e.Hops != 1 || len(e.Provenance) != 1 {
		t.Fatalf("Next changed its receiver: %+v", e)
	}
	next.Scopes[0] = "changed"
	if e.Scopes[0] != "refunds:write" {
		t.Fatal("Next shares Scopes with its receiver")
	}
}

func TestCheck(t *testing.T) {
	granted := delegation.ReceiverPolicy{Granted: []string{"refunds:write", "refunds:read"}}
	tests := []struct {
		name   string
		edit   func(*delegation.Envelope) *delegation.Envelope
		self   delegation.Hop
		policy delegation.ReceiverPolicy
		want   error
	}{
		{name: "accepted", self: payHop, policy: granted},
		{name: "at the default limit", self: payHop, policy: granted, edit: func(e *delegation.Envelope) *delegation.Envelope {
			return e.Next(delegation.Hop{Agent: "b"}).Next(delegation.Hop{Agent: "c"}).Next(delegation.Hop{Agent: "d"})
		}},
		{name: "over the default limit", self: payHop, policy: granted, want: delegation.ErrHopLimit, edit: func(e *delegation.Envelope) *delegation.Envelope {
			return e.Next(delegation.Hop{Agent: "b"}).Next(delegation.Hop{Agent: "c"}).Next(delegation.Hop{Agent: "d"}).Next(delegation.Hop{Agent: "e"})
		}},
		{name: "over a set limit", self: payHop, want: delegation.ErrHopLimit,
			policy: delegation.ReceiverPolicy{MaxHops: 1, Granted: granted.Granted},
			edit:   func(e *delegation.Envelope) *delegation.Envelope { return e.Next(delegation.Hop{Agent: "b"}) }},
		{name: "deadline passed", self: payHop, policy: granted, want: delegation.ErrDeadlinePassed,
			edit: func(e *delegation.Envelope) *delegation.Envelope { e.Deadline = now; return e }},
		{name: "deadline long past", self: payHop, policy: granted, want: delegation.ErrDeadlinePassed,
			edit: func(e *delegation.Envelope) *delegation.Envelope { e.Deadline = now.AddDate(-1, 0, 0); return e }},
		{name: "no deadline", self: payHop, policy: granted, want: delegation.ErrMalformedEnvelope,
			edit: func(e *delegation.Envelope) *delegation.Envelope { e.Deadline = time.Time{}; return e }},
		{name: "scope not granted", self: payHop, want: delegation.ErrScopeNotGranted,
			policy: delegation.ReceiverPolicy{Granted: []string{"refunds:read"}}},
		{name: "no scopes granted by default", self: payHop, want: delegation.ErrScopeNotGranted},
		{name: "same name, another card: no cycle", self: delegation.Hop{Agent: "front", CardDigest: "sha256:" + hex64('c')}, policy: granted},
		{name: "cycle by card digest", self: delegation.Hop{Agent: "front-renamed", CardDigest: frontHop.CardDigest}, policy: granted, want: delegation.ErrCycle},
		{name: "cycle by card digest, same name", self: frontHop, policy: granted, want: delegation.ErrCycle},
		{name: "a hop without a card digest matches no one", self: payHop, policy: granted,
			edit: func(e *delegation.Envelope) *delegation.Envelope { return e.Next(delegation.Hop{Agent: "payments"}) }},
		{name: "malformed", self: payHop, policy: granted, want: delegation.ErrMalformedEnvelope,
			edit: func(e *delegation.Envelope) *delegation.Envelope { e.Actor = ""; return e }},
		{name: "nil", self: payHop, policy: granted, want: delegation.ErrMalformedEnvelope,
			edit: func(*delegation.Envelope) *delegation.Envelope { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := sampleEnvelope()
			if tt.edit != nil {
				e = tt.edit(e)
			}
			err := delegation.Check(e, tt.self, tt.policy, now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			wantOnly(t, err, tt.want)
		})
	}
}

// FuzzEnvelope feeds arbitrary JSON as the envelope's metadata value.
// EnvelopeFrom must never panic, and what it accepts must survive Attach and
// a trip over the wire unchanged.
func FuzzEnvelope(f *testing.F) {
	for _, raw := range malformed {
		f.Add([]byte(raw))
	}
	names, _ := filepath.Glob(filepath.Join("testdata", "envelopes", "*.json"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		e, ok, err := delegation.EnvelopeFrom(&a2a.Message{Metadata: map[string]any{delegation.EnvelopeExtension: v}})
		if !ok {
			t.Fatal("envelope present but not reported")
		}
		if err != nil {
			if !errors.Is(err, delegation.ErrMalformedEnvelope) || e != nil {
				t.Fatalf("refusal %v (envelope %v) does not wrap ErrMalformedEnvelope", err, e)
			}
			return
		}
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
		e.Attach(m)
		again, ok, err := delegation.EnvelopeFrom(overTheWire(t, m))
		if !ok || err != nil {
			t.Fatalf("re-encoded envelope refused: %v", err)
		}
		sameEnvelope(t, again, e)
	})
}

// TestCheckCycleMessage: the refusal names the hop's agent and its card,
// whatever name the receiver goes by.
func TestCheckCycleMessage(t *testing.T) {
	now := time.Now()
	card := "sha256:" + strings.Repeat("ab", 32)
	e := &delegation.Envelope{Actor: "user:a", Hops: 1, Provenance: []delegation.Hop{{Agent: "Bystander", CardDigest: card}}, Deadline: now.Add(time.Minute)}
	err := delegation.Check(e, delegation.Hop{Agent: "Bystander (renamed)", CardDigest: card}, delegation.ReceiverPolicy{}, now)
	if want := `agent "Bystander" (card ` + card + `) already at hop 0`; !errors.Is(err, delegation.ErrCycle) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("Check = %v, want it to end with %q", err, want)
	}
}

// TestCheckDeadlineMessages: a refused deadline says what was wrong with it.
func TestCheckDeadlineMessages(t *testing.T) {
	for _, tt := range []struct {
		name     string
		deadline time.Time
		want     string
	}{
		{"none", time.Time{}, "malformed delegation envelope: no deadline"},
		{"past", now.Add(-time.Minute), "delegation deadline passed: deadline 2026-11-29T11:59:00Z, now 2026-11-29T12:00:00Z"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &delegation.Envelope{Actor: "user:a", Deadline: tt.deadline}
			if err := delegation.Check(e, payHop, delegation.ReceiverPolicy{}, now); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want %q…", err, tt.want)
			}
		})
	}
}
