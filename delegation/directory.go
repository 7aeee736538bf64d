package delegation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/agentcard"
)

// cardPath is where A2A agents serve their card, under their base URL.
const cardPath = ".well-known/agent-card.json"

// A PeerConfig names one peer and the keys that may sign its card.
type PeerConfig struct {
	// Name identifies the peer in config, logs and `handoff peers`.
	Name string
	// BaseURL is where the peer serves /.well-known/agent-card.json.
	BaseURL string
	// Trust says which keys may sign the peer's card; it must trust some key.
	Trust agentcard.TrustPolicy
}

// A PeerState is the outcome of a peer's latest refresh.
type PeerState string

// Peer states. Only a verified peer offers its skills.
const (
	// StatePending: not refreshed yet.
	StatePending PeerState = "pending"
	// StateVerified: the card was fetched and a trusted key signed it.
	StateVerified PeerState = "verified"
	// StateRefused: the card was fetched but is too large, malformed, or
	// not signed by a key the peer's trust policy allows.
	StateRefused PeerState = "refused"
	// StateUnreachable: the card could not be fetched.
	StateUnreachable PeerState = "unreachable"
)

// A PeerStatus is what the directory knows of one peer after its latest
// refresh. Card, KeyID and CardDigest are set only when State is
// [StateVerified]: a refused or unreachable peer offers nothing, not even
// the skills of a card it once served.
type PeerStatus struct {
	// Name and BaseURL are from the peer's [PeerConfig].
	Name, BaseURL string
	// State is the outcome of the latest refresh.
	State PeerState
	// Err is why the peer is refused or unreachable; nil otherwise. It
	// wraps an agentcard sentinel (such as [agentcard.ErrBadSignature]),
	// [ErrCardTooLarge] or [ErrUnreachable].
	Err error
	// Card is the verified card. It is shared: treat it as read-only.
	Card *a2a.AgentCard
	// KeyID is the kid of the key that verified Card.
	KeyID string
	// CardDigest is Card's [CardDigest].
	CardDigest string
	// FetchedAt is when the peer last served its card (200, or 304 for the
	// cached one); zero if it never has.
	FetchedAt time.Time
}

// A Directory knows the configured peers, their verified cards and the
// skills they offer. It is safe for concurrent use.
type Directory struct {
	cfg   dirConfig
	peers []*peer // config order, which ForSkill's choice follows

	refreshMu sync.Mutex // one Refresh at a time, so an older result never overwrites a newer one

	mu     sync.RWMutex
	status []PeerStatus // parallel to peers
}

// peer is one configured peer and its HTTP cache; only Refresh touches it.
type peer struct {
	cfg      PeerConfig
	cardURL  string
	verifier *agentcard.Verifier
	etag     string         // of the card last served with 200
	cached   *a2a.AgentCard // parsed from that response, verified or not
}

// NewDirectory checks the peers (distinct names, absolute http(s) base URLs,
// trust policies that trust some key) and returns a Directory in which every
// peer is [StatePending] until the first [Directory.Refresh].
func NewDirectory(peers []PeerConfig, opts ...Option) (*Directory, error) {
	d := &Directory{cfg: newDirConfig(opts)}
	seen := map[string]bool{}
	var errs []error
	for i, pc := range peers {
		switch {
		case pc.Name == "":
			errs = append(errs, fmt.Errorf("peer %d: no name", i))
			continue
		case seen[pc.Name]:
			errs = append(errs, fmt.Errorf("peer %q: name used twice", pc.Name))
			continue
		case len(pc.Trust.Keys.Keys) == 0 && len(pc.Trust.JKUPrefixes) == 0:
			// Such a peer could never verify; saying so now beats a refusal at every refresh.
			errs = append(errs, fmt.Errorf("peer %q: trust policy trusts no key", pc.Name))
			continue
		}
		seen[pc.Name] = true
		u, err := url.Parse(pc.BaseURL)
		if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("peer %q: base URL %q is not an absolute http(s) URL without userinfo, query or fragment", pc.Name, pc.BaseURL))
			continue
		}
		v, err := agentcard.NewVerifier(pc.Trust, agentcard.WithHTTPClient(d.cfg.client), agentcard.WithFetchTimeout(d.cfg.timeout))
		if err != nil {
			errs = append(errs, fmt.Errorf("peer %q: %w", pc.Name, err))
			continue
		}
		d.peers = append(d.peers, &peer{cfg: pc, cardURL: u.JoinPath(cardPath).String(), verifier: v})
		d.status = append(d.status, PeerStatus{Name: pc.Name, BaseURL: pc.BaseURL, State: StatePending})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	return d, nil
}

// Refresh fetches every peer's card, concurrently, and records the outcome
// per peer; a refused or unreachable peer is an outcome, not an error. A
// cached card is revalidated with If-None-Match, and a 304 reuses it without
// parsing; it is verified again all the same, since a JWKS may have dropped
// its key. Refresh returns ctx's error when ctx ends first, leaving the
// peers it did not finish as they were.
func (d *Directory) Refresh(ctx context.Context) error {
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	var wg sync.WaitGroup
	for i, p := range d.peers {
		wg.Go(func() {
			st := p.refresh(ctx, d.cfg)
			if ctx.Err() != nil {
				return // the failure is ours, not the peer's
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if st.FetchedAt.IsZero() {
				st.FetchedAt = d.status[i].FetchedAt
			}
			d.logChange(d.status[i], st)
			d.status[i] = st
		})
	}
	wg.Wait()
	return ctx.Err()
}

// logChange logs a peer's new state when it or its reason changed.
func (d *Directory) logChange(was, now PeerStatus) {
	if was.State == now.State && errText(was.Err) == errText(now.Err) && was.KeyID == now.KeyID {
		return
	}
	switch now.State {
	case StateRefused, StateUnreachable:
		d.cfg.log.Warn("peer "+string(now.State), slog.String("peer", now.Name), slog.String("url", now.BaseURL),
			slog.String("reason", errText(now.Err)))
	case StateVerified:
		d.cfg.log.Info("peer verified", slog.String("peer", now.Name), slog.String("url", now.BaseURL),
			slog.String("kid", now.KeyID), slog.String("card_digest", now.CardDigest))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// refresh fetches, parses and verifies p's card.
func (p *peer) refresh(ctx context.Context, cfg dirConfig) PeerStatus {
	st := PeerStatus{Name: p.cfg.Name, BaseURL: p.cfg.BaseURL}
	card, err := p.fetch(ctx, cfg)
	switch {
	case errors.Is(err, ErrUnreachable):
		st.State, st.Err = StateUnreachable, err
		return st
	case err != nil:
		st.State, st.Err, st.FetchedAt = StateRefused, err, time.Now()
		return st
	}
	st.FetchedAt = time.Now()
	kid, err := p.verifier.Verify(ctx, card)
	if err != nil {
		st.State, st.Err = StateRefused, err
		return st
	}
	digest, err := CardDigest(card)
	if err != nil { // cannot happen for a card Verify just canonicalised; refused all the same
		st.State, st.Err = StateRefused, err
		return st
	}
	st.State, st.Card, st.KeyID, st.CardDigest = StateVerified, card, kid, digest
	return st
}

// fetch returns the card p serves: the cached one on a 304, else the newly
// parsed one. Errors wrap [ErrUnreachable], [ErrCardTooLarge] or
// [agentcard.ErrMalformed].
func (p *peer) fetch(ctx context.Context, cfg dirConfig) (*a2a.AgentCard, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cardURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, p.cardURL, err)
	}
	req.Header.Set("Accept", "application/json")
	if p.cached != nil && p.etag != "" {
		req.Header.Set("If-None-Match", p.etag)
	}
	resp, err := cfg.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && p.cached != nil && p.etag != "":
		return p.cached, nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s: status %s", ErrUnreachable, p.cardURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, cfg.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, p.cardURL, err)
	}
	// Whatever was cached is stale now that the peer served something else.
	p.cached, p.etag = nil, ""
	if int64(len(body)) > cfg.maxBytes {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrCardTooLarge, p.cardURL, cfg.maxBytes)
	}
	card, err := agentcard.ParseCard(body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.cardURL, err)
	}
	p.cached, p.etag = card, resp.Header.Get("ETag")
	return card, nil
}

// Peers returns every configured peer's status, in config order.
func (d *Directory) Peers() []PeerStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return slices.Clone(d.status)
}

// ForSkill returns the first verified peer, in config order, whose card
// lists the skill skillID with every one of tags. It reports false when no
// verified peer does.
func (d *Directory) ForSkill(skillID string, tags ...string) (PeerStatus, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, st := range d.status {
		if st.State != StateVerified {
			continue
		}
		for _, s := range st.Card.Skills {
			if s.ID == skillID && hasAll(s.Tags, tags) {
				return st, true
			}
		}
	}
	return PeerStatus{}, false
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// CardDigest returns "sha256:" and the lowercase hex SHA-256 of card's
// [agentcard.CanonicalPayload]: the same for every encoding of one card, and
// unaffected by its signatures, so re-signing a card keeps its digest.
func CardDigest(card *a2a.AgentCard) (string, error) {
	payload, err := agentcard.CanonicalPayload(card)
	if err != nil {
		return "", fmt.Errorf("card digest: %w", err)
	}
	sum := sha256.Sum256(payload)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// BestInterface returns the interface of card to call: A2A 1.0 over JSON-RPC,
// else HTTP+JSON, else gRPC, the first listed of each; nil when the card
// offers none of these with a URL.
func BestInterface(card *a2a.AgentCard) *a2a.AgentInterface {
	if card == nil {
		return nil
	}
	// JSON-RPC first, the binding every A2A SDK serves; gRPC last, since it
	// needs HTTP/2 through every proxy on the way.
	preference := []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON, a2a.TransportProtocolGRPC}
	for _, b := range preference {
		for _, iface := range card.SupportedInterfaces {
			if iface != nil && iface.URL != "" && strings.EqualFold(string(iface.ProtocolBinding), string(b)) && isV1(iface.ProtocolVersion) {
				return iface
			}
		}
	}
	return nil
}

// isV1 accepts "1.0" and its patch forms ("1.0.0"): patches do not change the wire.
func isV1(v a2a.ProtocolVersion) bool {
	return v == a2a.Version || strings.HasPrefix(string(v), string(a2a.Version)+".")
}
