package webhook

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/handoff-a2a/handoff/internal/auth"
)

const (
	// clockSkew is how far iat may be ahead of the verifier's clock, and exp
	// behind it.
	clockSkew = time.Minute
	// defaultMaxAge is how old a delivery's iat may be by default.
	defaultMaxAge = 5 * time.Minute
	// maxDeliveryBytes bounds the body the Middleware reads.
	maxDeliveryBytes = 4 << 20
	// maxSeenDeliveries bounds the replay cache. Past it, the oldest ids are
	// dropped first; they are the closest to being refused as stale anyway.
	maxSeenDeliveries = 1 << 16
)

// signatureAlgorithms are the JWT algorithms accepted: asymmetric only, so
// the public JWKS can never serve as an HMAC secret.
var signatureAlgorithms = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256, jose.ES384, jose.RS256, jose.PS256}

// Verified is a delivery that passed [Verifier.Verify].
type Verified struct {
	// TaskID is the task_id claim: the task the event belongs to.
	TaskID string
	// DeliveryID is the delivery_id claim, the same for every attempt of
	// one delivery (the jti differs per attempt); use it to drop duplicates.
	DeliveryID string
	// KeyID is the kid of the agent key that signed the delivery.
	KeyID string
	jti   string // this attempt's, for the replay cache
	// Body is the delivery's body, the event as JSON.
	Body []byte
}

// A Verifier checks deliveries signed by one agent's
// [github.com/handoff-a2a/handoff/push.Signer], for the owner of a webhook:
// no shared secret, only the agent's published JWKS. It is safe for
// concurrent use.
type Verifier struct {
	audience string
	cfg      config
	keys     *auth.RemoteKeys
	seen     replayCache
}

// NewVerifier returns a Verifier for deliveries to the webhook URL audience,
// signed by keys of the JWKS at jwksURL (the agent's
// /.well-known/jwks.json). The JWKS is fetched when first needed, cached
// for 5 minutes, and fetched again for an unknown kid at most every 30
// seconds, so a rotated key is picked up and a flood of forged kids costs
// the agent nothing.
func NewVerifier(jwksURL, audience string, opts ...Option) *Verifier {
	cfg := newConfig(opts)
	keys := auth.NewRemoteKeys(jwksURL)
	keys.Client = cfg.client
	return &Verifier{audience: audience, cfg: cfg, keys: keys, seen: replayCache{until: make(map[string]time.Time)}}
}

// Verify checks one delivery: its headers h and its body, as received. It
// checks the signature against the agent's JWKS, the audience (URLs that
// differ only in case, default port or an empty path are the same), iss if
// [WithIssuer] is set, the age of iat, the body hash, the token if
// [WithToken] is set, and finally that the jti was not accepted before
// within the max age; only then is the jti recorded. The error wraps one of
// the sentinels above.
func (v *Verifier) Verify(ctx context.Context, h http.Header, body []byte) (*Verified, error) {
	raw := h.Get(HeaderSignature)
	if raw == "" {
		return nil, fmt.Errorf("%w: no %s header", ErrBadSignature, HeaderSignature)
	}
	tok, err := jwt.ParseSigned(raw, signatureAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: not a JWT with an accepted algorithm: %w", ErrBadSignature, err)
	}
	hdr := tok.Headers[0] // a compact JWT has exactly one
	if typ, _ := hdr.ExtraHeaders[jose.HeaderType].(string); typ != "JWT" {
		// Other JWS made with the same keys (card signatures: typ JOSE) are not deliveries.
		return nil, fmt.Errorf("%w: typ %q, want JWT", ErrBadSignature, typ)
	}
	key, err := v.keys.Key(ctx, hdr.KeyID)
	switch {
	case errors.Is(err, auth.ErrKeysUnavailable) || err != nil && !errors.Is(err, auth.ErrUnknownKey):
		return nil, fmt.Errorf("%w: %w", ErrJWKSUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, hdr.KeyID)
	}
	if key.Algorithm != "" && key.Algorithm != hdr.Algorithm {
		return nil, fmt.Errorf("%w: alg %s, key %q is for %s", ErrBadSignature, hdr.Algorithm, hdr.KeyID, key.Algorithm)
	}
	if key.Use != "" && key.Use != "sig" {
		return nil, fmt.Errorf("%w: key %q is for use %q", ErrBadSignature, hdr.KeyID, key.Use)
	}
	var std jwt.Claims
	var own Claims
	if err := tok.Claims(key, &std, &own); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if std.ID == "" || own.TaskID == "" || own.DeliveryID == "" {
		return nil, fmt.Errorf("%w: the claims lack jti, delivery_id or task_id", ErrBadSignature)
	}
	if !audienceMatches(std.Audience, v.audience) {
		return nil, fmt.Errorf("%w: aud %q, want %q", ErrWrongAudience, []string(std.Audience), v.audience)
	}
	if v.cfg.issuer != "" && std.Issuer != v.cfg.issuer {
		return nil, fmt.Errorf("%w: iss %q, want %q", ErrWrongIssuer, std.Issuer, v.cfg.issuer)
	}
	now := v.cfg.now()
	if std.IssuedAt == nil {
		return nil, fmt.Errorf("%w: no iat", ErrStale)
	}
	iat := std.IssuedAt.Time()
	switch {
	case iat.After(now.Add(clockSkew)):
		return nil, fmt.Errorf("%w: iat %s is ahead of the clock (%s)", ErrStale, iat.Format(time.RFC3339), now.Format(time.RFC3339))
	case now.Sub(iat) > v.cfg.maxAge:
		return nil, fmt.Errorf("%w: iat %s is older than %s", ErrStale, iat.Format(time.RFC3339), v.cfg.maxAge)
	case std.Expiry != nil && now.After(std.Expiry.Time().Add(clockSkew)):
		return nil, fmt.Errorf("%w: expired at %s", ErrStale, std.Expiry.Time().Format(time.RFC3339))
	}
	if own.BodySHA256 != BodyHash(body) {
		return nil, fmt.Errorf("%w: delivery %s", ErrBodyMismatch, std.ID)
	}
	if v.cfg.token != "" {
		got := h.Get(HeaderToken)
		if got == "" {
			got = h.Get(HeaderTokenX)
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(v.cfg.token)) != 1 {
			return nil, fmt.Errorf("%w: delivery %s", ErrBadToken, std.ID)
		}
	}
	// Kept until the delivery would be refused as stale anyway.
	if !v.seen.add(std.ID, iat.Add(v.cfg.maxAge+clockSkew), now) {
		return nil, fmt.Errorf("%w: delivery %s", ErrReplay, std.ID)
	}
	return &Verified{TaskID: own.TaskID, DeliveryID: own.DeliveryID, KeyID: hdr.KeyID, Body: body, jti: std.ID}, nil
}

// audienceMatches reports whether aud names the webhook URL want.
func audienceMatches(aud jwt.Audience, want string) bool {
	wantURL, wantOK := normalURL(want)
	for _, a := range aud {
		if a == want {
			return true
		}
		if got, ok := normalURL(a); ok && wantOK && got == wantURL {
			return true
		}
	}
	return false
}

// normalURL is s in a form where equivalent http(s) URLs are equal (RFC 3986
// section 6.2.3): scheme and host lower-cased, default port and userinfo
// dropped, empty path as "/". An agent posts to the URL exactly as
// registered, so "http://h:9000" and "http://h:9000/" name one webhook.
func normalURL(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" || strings.Contains(host, ":") {
		host = net.JoinHostPort(host, port)
		host = strings.TrimSuffix(host, ":") // an IPv6 host without a port
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	out := strings.ToLower(u.Scheme) + "://" + host + path
	if u.RawQuery != "" || u.ForceQuery {
		out += "?" + u.RawQuery
	}
	return out, true
}

// replayCache remembers accepted delivery ids until they would be stale.
type replayCache struct {
	mu    sync.Mutex
	until map[string]time.Time
	order []seenID // in insertion order, for pruning; may hold forgotten ids
}

type seenID struct {
	id    string
	until time.Time
}

// add records id until the given time and reports whether it was new (or
// its earlier record had expired).
func (c *replayCache) add(id string, until, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.order) > 0 && (c.order[0].until.Before(now) || len(c.until) >= maxSeenDeliveries) {
		old := c.order[0]
		c.order = c.order[1:]
		if t, ok := c.until[old.id]; ok && t.Equal(old.until) { // not re-added since
			delete(c.until, old.id)
		}
	}
	if t, ok := c.until[id]; ok && !t.Before(now) {
		return false
	}
	c.until[id] = until
	c.order = append(c.order, seenID{id, until})
	return true
}

// forget drops id, so its next attempt is accepted.
func (c *replayCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.until, id)
}

type verifiedKey struct{}

// VerifiedFrom returns the delivery [Verifier.Middleware] verified for the
// request whose context is ctx.
func VerifiedFrom(ctx context.Context) (*Verified, bool) {
	v, ok := ctx.Value(verifiedKey{}).(*Verified)
	return v, ok
}

// Middleware verifies each request as a delivery before next sees it. It
// reads the body (at most 4 MiB; 413 beyond), and answers a refused delivery
// with 401 and the sentinel's short text, or 503 when the JWKS cannot be
// fetched (the agent retries that). An accepted request reaches next with
// its body restored and the [Verified] delivery in its context
// ([VerifiedFrom]).
//
// If next answers anything but 2xx, the delivery's id is forgotten by the
// replay check: the agent will retry it, and that retry must get through.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDeliveryBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "delivery body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read delivery body", http.StatusBadRequest)
			return
		}
		d, err := v.Verify(r.Context(), r.Header, body)
		if err != nil {
			v.cfg.logger.LogAttrs(r.Context(), slog.LevelWarn, "push delivery refused",
				slog.String("remote", r.RemoteAddr), slog.String("reason", err.Error()))
			status := http.StatusUnauthorized
			if errors.Is(err, ErrJWKSUnavailable) {
				status = http.StatusServiceUnavailable
			}
			http.Error(w, publicReason(err), status)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), verifiedKey{}, d))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status != 0 && (sw.status < 200 || sw.status > 299) { // 0: nothing written, net/http sends 200
			v.seen.forget(d.jti)
		}
	})
}

// publicReason is the sentinel err wraps: short, and free of the detail
// meant for the webhook owner's log.
func publicReason(err error) string {
	for _, s := range refusals {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "delivery refused"
}

// statusWriter records the status next answers with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are interim, the final status follows
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
