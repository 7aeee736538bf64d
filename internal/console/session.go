package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// Names of the session cookie and of the header that carries the CSRF token.
const (
	cookieName = "handoff_console"
	csrfHeader = "X-CSRF-Token"
)

// maxSessions bounds the sessions held; a sign-in beyond it replaces the
// one closest to expiry. Only callers with valid credentials make one.
const maxSessions = 10000

// session is one signed-in browser. It holds the credential, never sent
// back to the browser: every request checks it again.
type session struct {
	header, value string // the credential's header and its value
	csrf          string
	expires       time.Time
}

type sessions struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, m: map[string]*session{}}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) add(sess *session) string {
	id := randomToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		var oldest string
		for k, v := range s.m {
			if oldest == "" || v.expires.Before(s.m[oldest].expires) {
				oldest = k
			}
		}
		delete(s.m, oldest)
	}
	s.m[id] = sess
	return id
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[id]
	if sess != nil && time.Now().After(sess.expires) {
		delete(s.m, id)
		return nil
	}
	return sess
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	delete(s.m, id)
	s.mu.Unlock()
}

// caller is the signed-in caller of one request.
type caller struct {
	principal *auth.Principal // nil: anonymous
	csrf      string
	sessionID string
}

func (c caller) name() string {
	if c.principal == nil {
		return ""
	}
	return c.principal.Name
}

// signInRequest is the sign-in form: one credential.
type signInRequest struct {
	APIKey string `json:"api_key"`
	Bearer string `json:"bearer"`
}

// signIn checks a credential as the agent checks its callers and, if it is
// good, starts a session. There is no session yet to hold a CSRF token, so
// the request must come from the console's own origin and be JSON, which a
// cross-site form cannot send.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) || !isJSON(r) {
		writeError(w, http.StatusForbidden, "sign in from the console's own page")
		return
	}
	var in signInRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "the sign-in is not a JSON object with api_key or bearer")
		return
	}
	sess := &session{csrf: randomToken(), expires: time.Now().Add(c.cfg.SessionTTL)}
	switch {
	case in.APIKey != "" && in.Bearer != "":
		writeError(w, http.StatusBadRequest, "give one credential, an API key or a bearer token")
		return
	case in.APIKey != "":
		sess.header, sess.value = c.cfg.APIKeyHeader, strings.TrimSpace(in.APIKey)
	case in.Bearer != "":
		sess.header, sess.value = "Authorization", "Bearer "+strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(in.Bearer), "Bearer "))
	}
	p, err := c.check(r, sess)
	if err != nil {
		c.cfg.Logger.Info("console sign-in refused", slog.Any("error", err))
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	id := c.sessions.add(sess)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: Prefix, MaxAge: int(c.cfg.SessionTTL.Seconds()),
		HttpOnly: true, Secure: c.cfg.Secure || r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.cfg.Logger.Info("console sign-in", slog.String("principal", principalName(p)))
	c.writeMe(w, caller{principal: p, csrf: sess.csrf})
}

// check authenticates the session's credential, as it would a request
// that carried it.
func (c *Console) check(r *http.Request, sess *session) (*auth.Principal, error) {
	probe := (&http.Request{Header: http.Header{}}).WithContext(r.Context())
	if sess.header != "" {
		probe.Header.Set(sess.header, sess.value)
	}
	return c.cfg.Authenticate(probe)
}

// signedIn runs h for requests of a live session whose credential still
// authenticates, with the caller's principal in the request's context; a
// request that changes state must also carry the session's CSRF token.
func (c *Console) signedIn(h func(http.ResponseWriter, *http.Request, caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(cookieName)
		var sess *session
		if err == nil {
			sess = c.sessions.get(ck.Value)
		}
		if sess == nil {
			writeError(w, http.StatusUnauthorized, "sign in first")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			token := r.Header.Get(csrfHeader)
			if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) != 1 || !sameOrigin(r) {
				writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
				return
			}
		}
		p, err := c.check(r, sess)
		if err != nil { // revoked, expired: the session ends with its credential
			c.sessions.remove(ck.Value)
			writeError(w, http.StatusUnauthorized, "the session's credential no longer authenticates: sign in again")
			return
		}
		ctx := r.Context()
		if p != nil {
			ctx = auth.WithPrincipal(ctx, p)
		}
		h(w, r.WithContext(ctx), caller{principal: p, csrf: sess.csrf, sessionID: ck.Value})
	})
}

func (c *Console) me(w http.ResponseWriter, _ *http.Request, who caller) { c.writeMe(w, who) }

// writeMe answers who is signed in, whether they approve, and the CSRF
// token their page sends with every change. Another origin cannot read it:
// the console sends no CORS headers.
func (c *Console) writeMe(w http.ResponseWriter, who caller) {
	name := who.name()
	writeJSON(w, map[string]any{"principal": principalName(who.principal), "approver": name != "" && c.cfg.IsApprover(name),
		"csrf": who.csrf})
}

func (c *Console) signOut(w http.ResponseWriter, _ *http.Request, who caller) {
	c.sessions.remove(who.sessionID)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

func principalName(p *auth.Principal) string {
	if p == nil {
		return "anonymous"
	}
	return p.Name
}

// sameOrigin reports whether a request that names its origin (browsers do
// on every POST) names this host; one that names none is no browser's
// cross-site request.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func isJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return ct == "application/json" || strings.HasPrefix(ct, "application/json;")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
