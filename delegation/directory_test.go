package delegation_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
	"github.com/handoff-a2a/handoff/delegation"
)

// peerServer serves an agent card (with an ETag) and a JWKS at /keys/jwks.json.
type peerServer struct {
	*httptest.Server
	notModified atomic.Int32

	mu   sync.Mutex
	card []byte // nil: 503
	etag string
	jwks []byte
}

func startPeer(t *testing.T) *peerServer {
	t.Helper()
	p := &peerServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		card, etag := p.card, p.etag
		p.mu.Unlock()
		switch {
		case card == nil:
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		case r.Header.Get("If-None-Match") == etag:
			p.notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("ETag", etag)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(card)
		}
	})
	mux.HandleFunc("GET /keys/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, _ = w.Write(p.jwks)
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

// serve makes body the served card, with an ETag of its own.
func (p *peerServer) serve(body []byte) {
	sum := sha256.Sum256(body)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.card, p.etag = body, `"`+hex.EncodeToString(sum[:8])+`"`
}

func (p *peerServer) serveJWKS(t *testing.T, keys ...*jose.JSONWebKey) {
	t.Helper()
	b, err := keySet(t, keys...).JWKS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jwks = b
}

func keySet(t *testing.T, keys ...*jose.JSONWebKey) *agentcard.KeySet {
	t.Helper()
	var ks []agentcard.Key
	for _, k := range keys {
		ks = append(ks, agentcard.Key{JWK: k})
	}
	set, err := agentcard.NewKeySet(time.Hour, ks...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// pinned is a trust policy pinning keys, read back from their published JWKS.
func pinned(t *testing.T, keys ...*jose.JSONWebKey) agentcard.TrustPolicy {
	t.Helper()
	b, err := keySet(t, keys...).JWKS(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var policy agentcard.TrustPolicy
	if err := json.Unmarshal(b, &policy.Keys); err != nil {
		t.Fatal(err)
	}
	return policy
}

func newKey(t *testing.T, kid string) *jose.JSONWebKey {
	t.Helper()
	k, err := agentcard.GenerateKey(jose.EdDSA, kid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// paymentsCard is a peer's card offering the "refund" skill.
func paymentsCard(name, url string) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:        name,
		Description: "Pays refunds.",
		Version:     "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(url+"/a2a/rest", a2a.TransportProtocolHTTPJSON),
			a2a.NewAgentInterface(url+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC),
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{delegation.ExtensionDeclaration()}},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"application/json"},
		Skills: []a2a.AgentSkill{
			{ID: "refund", Name: "Refund", Description: "Refunds an order.", Tags: []string{"payments", "refunds"}},
		},
	}
}

func signed(t *testing.T, card *a2a.AgentCard, key *jose.JSONWebKey, jku string) []byte {
	t.Helper()
	s, err := agentcard.Sign(card, key, jku)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newDirectory(t *testing.T, peers []delegation.PeerConfig, opts ...delegation.Option) *delegation.Directory {
	t.Helper()
	d, err := delegation.NewDirectory(peers, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// refresh refreshes d and returns the one peer's status.
func refresh(t *testing.T, d *delegation.Directory) delegation.PeerStatus {
	t.Helper()
	if err := d.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	return d.Peers()[0]
}

func wantVerified(t *testing.T, d *delegation.Directory, st delegation.PeerStatus) {
	t.Helper()
	if st.State != delegation.StateVerified || st.Err != nil || st.Card == nil {
		t.Fatalf("peer %s: state %s, err %v", st.Name, st.State, st.Err)
	}
	if got, ok := d.ForSkill("refund", "payments"); !ok || got.Name != st.Name {
		t.Fatalf("ForSkill(refund) = %s, %v; want %s", got.Name, ok, st.Name)
	}
}

func wantRefused(t *testing.T, d *delegation.Directory, st delegation.PeerStatus, state delegation.PeerState, reason error) {
	t.Helper()
	if st.State != state || !errors.Is(st.Err, reason) {
		t.Fatalf("peer %s: state %s, err %v; want %s, %v", st.Name, st.State, st.Err, state, reason)
	}
	if st.Card != nil || st.KeyID != "" || st.CardDigest != "" {
		t.Fatalf("peer %s is %s but still shows card %q (kid %q)", st.Name, st.State, st.CardDigest, st.KeyID)
	}
	if got, ok := d.ForSkill("refund"); ok {
		t.Fatalf("ForSkill(refund) = %s after %s refused", got.Name, st.Name)
	}
}

func TestDirectoryVerifiedPeer(t *testing.T) {
	srv := startPeer(t)
	key := newKey(t, "pay-1")
	srv.serveJWKS(t, key)
	card := paymentsCard("payments", srv.URL)
	srv.serve(signed(t, card, key, srv.URL+"/keys/jwks.json"))
	d := newDirectory(t, []delegation.PeerConfig{{
		Name: "payments", BaseURL: srv.URL, Trust: agentcard.TrustPolicy{JKUPrefixes: []string{srv.URL + "/keys/"}},
	}})
	if st := d.Peers()[0]; st.State != delegation.StatePending {
		t.Fatalf("before Refresh: state %s", st.State)
	}

	st := refresh(t, d)
	wantVerified(t, d, st)
	digest, err := delegation.CardDigest(card)
	if err != nil {
		t.Fatal(err)
	}
	if st.KeyID != "pay-1" || st.CardDigest != digest || st.FetchedAt.IsZero() {
		t.Errorf("kid %q, digest %q (want %q), fetched at %v", st.KeyID, st.CardDigest, digest, st.FetchedAt)
	}
	if iface := delegation.BestInterface(st.Card); iface == nil || iface.URL != srv.URL+"/a2a/jsonrpc" {
		t.Errorf("BestInterface = %+v, want the JSON-RPC interface", iface)
	}
	if _, ok := d.ForSkill("refund", "payments", "crypto"); ok {
		t.Error("ForSkill matched a tag the skill does not have")
	}
	if _, ok := d.ForSkill("chargeback"); ok {
		t.Error("ForSkill matched a skill the card does not list")
	}
}

func TestDirectoryTamperedCard(t *testing.T) {
	srv := startPeer(t)
	key := newKey(t, "pay-1")
	good := signed(t, paymentsCard("payments", srv.URL), key, "")
	d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}})
	srv.serve(good)
	wantVerified(t, d, refresh(t, d))

	tampered := bytes.Replace(good, []byte("Pays refunds."), []byte("Pays refundz."), 1)
	if bytes.Equal(tampered, good) {
		t.Fatal("description not found in the served card")
	}
	srv.serve(tampered)
	wantRefused(t, d, refresh(t, d), delegation.StateRefused, agentcard.ErrBadSignature)

	srv.serve(good) // verifies again: the skills come back
	wantVerified(t, d, refresh(t, d))
}

func TestDirectoryKeyOutsideTrust(t *testing.T) {
	tests := []struct {
		name string
		jku  func(srvURL string) string
		want error
	}{
		{name: "unpinned kid", jku: func(string) string { return "" }, want: agentcard.ErrUnknownKey},
		{name: "jku outside the trust rule", jku: func(u string) string { return u + "/other/jwks.json" }, want: agentcard.ErrUntrustedJKU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startPeer(t)
			key, other := newKey(t, "pay-1"), newKey(t, "pay-evil")
			srv.serveJWKS(t, other)
			card := paymentsCard("payments", srv.URL)
			d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}})
			srv.serve(signed(t, card, key, ""))
			wantVerified(t, d, refresh(t, d))

			srv.serve(signed(t, card, other, tt.jku(srv.URL)))
			wantRefused(t, d, refresh(t, d), delegation.StateRefused, tt.want)
		})
	}
}

func TestDirectoryETag(t *testing.T) {
	srv := startPeer(t)
	key := newKey(t, "pay-1")
	d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}})
	srv.serve(signed(t, paymentsCard("payments", srv.URL), key, ""))
	first := refresh(t, d)
	wantVerified(t, d, first)

	second := refresh(t, d)
	wantVerified(t, d, second)
	if n := srv.notModified.Load(); n != 1 {
		t.Fatalf("%d responses were 304, want 1", n)
	}
	if second.Card != first.Card || second.CardDigest != first.CardDigest {
		t.Fatal("a 304 replaced the cached card: it was parsed again")
	}
	if second.FetchedAt.Before(first.FetchedAt) {
		t.Errorf("FetchedAt went back from %v to %v", first.FetchedAt, second.FetchedAt)
	}

	changed := paymentsCard("payments", srv.URL)
	changed.Description = "Pays refunds, faster."
	srv.serve(signed(t, changed, key, ""))
	third := refresh(t, d)
	wantVerified(t, d, third)
	if third.Card == first.Card || third.Card.Description != changed.Description {
		t.Fatal("a changed card (new ETag) did not replace the cached one")
	}
}

func TestDirectoryUnreachable(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: gone.URL, Trust: pinned(t, newKey(t, "k"))}})
		wantRefused(t, d, refresh(t, d), delegation.StateUnreachable, delegation.ErrUnreachable)
	})
	t.Run("verified, then down", func(t *testing.T) {
		srv := startPeer(t)
		key := newKey(t, "pay-1")
		d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}})
		srv.serve(signed(t, paymentsCard("payments", srv.URL), key, ""))
		first := refresh(t, d)
		wantVerified(t, d, first)

		srv.serve(nil) // 503
		st := refresh(t, d)
		wantRefused(t, d, st, delegation.StateUnreachable, delegation.ErrUnreachable)
		if !st.FetchedAt.Equal(first.FetchedAt) {
			t.Errorf("FetchedAt %v, want the last successful fetch %v", st.FetchedAt, first.FetchedAt)
		}
	})
}

func TestDirectoryCardTooLarge(t *testing.T) {
	srv := startPeer(t)
	key := newKey(t, "pay-1")
	d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}},
		delegation.WithMaxCardBytes(64))
	srv.serve(signed(t, paymentsCard("payments", srv.URL), key, ""))
	wantRefused(t, d, refresh(t, d), delegation.StateRefused, delegation.ErrCardTooLarge)
}

func TestForSkillPicksVerified(t *testing.T) {
	tampered, honest, second := startPeer(t), startPeer(t), startPeer(t)
	key := newKey(t, "pay-1")
	good := signed(t, paymentsCard("payments", tampered.URL), key, "")
	tampered.serve(bytes.Replace(good, []byte("Pays refunds."), []byte("Pays refundz."), 1))
	honest.serve(signed(t, paymentsCard("honest", honest.URL), key, ""))
	second.serve(signed(t, paymentsCard("second", second.URL), key, ""))
	d := newDirectory(t, []delegation.PeerConfig{
		{Name: "tampered", BaseURL: tampered.URL, Trust: pinned(t, key)},
		{Name: "honest", BaseURL: honest.URL, Trust: pinned(t, key)},
		{Name: "second", BaseURL: second.URL, Trust: pinned(t, key)},
	})
	if err := d.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	var states []delegation.PeerState
	for _, st := range d.Peers() {
		states = append(states, st.State)
	}
	if want := []delegation.PeerState{delegation.StateRefused, delegation.StateVerified, delegation.StateVerified}; !slices.Equal(states, want) {
		t.Fatalf("states %v, want %v", states, want)
	}
	for range 3 { // deterministic: the first verified peer in config order, every time
		if got, ok := d.ForSkill("refund", "refunds"); !ok || got.Name != "honest" {
			t.Fatalf("ForSkill = %q, %v; want honest", got.Name, ok)
		}
	}
}

func TestRefreshCanceled(t *testing.T) {
	srv := startPeer(t)
	key := newKey(t, "pay-1")
	srv.serve(signed(t, paymentsCard("payments", srv.URL), key, ""))
	d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := d.Refresh(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Refresh = %v, want context.Canceled", err)
	}
	if st := d.Peers()[0]; st.State != delegation.StatePending {
		t.Fatalf("a canceled refresh recorded %s (%v)", st.State, st.Err)
	}
}

func TestNewDirectoryRefusesConfig(t *testing.T) {
	trust := pinned(t, newKey(t, "k"))
	tests := map[string][]delegation.PeerConfig{
		"no name":        {{BaseURL: "https://p.example", Trust: trust}},
		"name twice":     {{Name: "p", BaseURL: "https://p.example", Trust: trust}, {Name: "p", BaseURL: "https://q.example", Trust: trust}},
		"trusts nothing": {{Name: "p", BaseURL: "https://p.example"}},
		"relative URL":   {{Name: "p", BaseURL: "p.example", Trust: trust}},
		"URL with query": {{Name: "p", BaseURL: "https://p.example/?x=1", Trust: trust}},
		"not http":       {{Name: "p", BaseURL: "ftp://p.example", Trust: trust}},
		"bad jku prefix": {{Name: "p", BaseURL: "https://p.example", Trust: agentcard.TrustPolicy{JKUPrefixes: []string{"keys/"}}}},
	}
	for name, peers := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := delegation.NewDirectory(peers); err == nil {
				t.Fatal("NewDirectory accepted it")
			}
		})
	}
}

func TestBestInterface(t *testing.T) {
	iface := func(url string, b a2a.TransportProtocol, v a2a.ProtocolVersion) *a2a.AgentInterface {
		return &a2a.AgentInterface{URL: url, ProtocolBinding: b, ProtocolVersion: v}
	}
	tests := []struct {
		name   string
		ifaces []*a2a.AgentInterface
		want   string // URL, "" for nil
	}{
		{name: "JSON-RPC over the rest", want: "j", ifaces: []*a2a.AgentInterface{
			iface("g", a2a.TransportProtocolGRPC, "1.0"), iface("h", a2a.TransportProtocolHTTPJSON, "1.0"), iface("j", a2a.TransportProtocolJSONRPC, "1.0"),
		}},
		{name: "HTTP+JSON over gRPC", want: "h", ifaces: []*a2a.AgentInterface{
			iface("g", a2a.TransportProtocolGRPC, "1.0"), iface("h", a2a.TransportProtocolHTTPJSON, "1.0"),
		}},
		{name: "gRPC alone", want: "g", ifaces: []*a2a.AgentInterface{iface("g", a2a.TransportProtocolGRPC, "1.0.0")}},
		{name: "0.3 JSON-RPC skipped", want: "h", ifaces: []*a2a.AgentInterface{
			iface("j03", a2a.TransportProtocolJSONRPC, "0.3"), iface("h", a2a.TransportProtocolHTTPJSON, "1.0"),
		}},
		{name: "first of a binding", want: "j1", ifaces: []*a2a.AgentInterface{
			iface("j1", a2a.TransportProtocolJSONRPC, "1.0"), iface("j2", a2a.TransportProtocolJSONRPC, "1.0"),
		}},
		{name: "none usable", ifaces: []*a2a.AgentInterface{
			nil, iface("", a2a.TransportProtocolJSONRPC, "1.0"), iface("w", "WEBSOCKET", "1.0"), iface("j", a2a.TransportProtocolJSONRPC, "1.1"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := delegation.BestInterface(&a2a.AgentCard{SupportedInterfaces: tt.ifaces})
			switch {
			case tt.want == "" && got != nil:
				t.Fatalf("BestInterface = %+v, want nil", got)
			case tt.want != "" && (got == nil || got.URL != tt.want):
				t.Fatalf("BestInterface = %+v, want URL %q", got, tt.want)
			}
		})
	}
	if delegation.BestInterface(nil) != nil {
		t.Fatal("BestInterface(nil) is not nil")
	}
}

// TestDirectoryLogsRefusal: a peer refused (a tampered card, then a key
// outside its trust rule) is logged at warn with the reason, once per
// change, and its return to verified at info.
func TestDirectoryLogsRefusal(t *testing.T) {
	srv := startPeer(t)
	key, other := newKey(t, "pay-1"), newKey(t, "pay-evil")
	card := paymentsCard("payments", srv.URL)
	good := signed(t, card, key, "")
	var logs bytes.Buffer
	d := newDirectory(t, []delegation.PeerConfig{{Name: "payments", BaseURL: srv.URL, Trust: pinned(t, key)}},
		delegation.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	srv.serve(good)
	refresh(t, d)
	srv.serve(bytes.Replace(good, []byte("Pays refunds."), []byte("Pays refundz."), 1))
	refresh(t, d)
	refresh(t, d) // the same refusal again: not logged twice
	srv.serve(signed(t, card, other, ""))
	refresh(t, d)
	srv.serve(good)
	refresh(t, d)

	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		_, rest, _ := strings.Cut(l, " level=") // drop the time
		lines = append(lines, rest)
	}
	want := []struct{ prefix, reason string }{
		{`INFO msg="peer verified" peer=payments url=` + srv.URL + ` kid=pay-1 card_digest=sha256:`, ""},
		{`WARN msg="peer refused" peer=payments url=` + srv.URL + ` reason=`, agentcard.ErrBadSignature.Error()},
		{`WARN msg="peer refused" peer=payments url=` + srv.URL + ` reason=`, `kid \"pay-evil\" is not pinned`},
		{`INFO msg="peer verified" peer=payments url=` + srv.URL + ` kid=pay-1 card_digest=sha256:`, ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w.prefix) || !strings.Contains(lines[i], w.reason) {
			t.Errorf("line %d:\n got %s\nwant %s… with %s", i, lines[i], w.prefix, w.reason)
		}
	}
}
