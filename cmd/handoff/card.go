package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/go-jose/go-jose/v4"

	"github.com/handoff-a2a/handoff/agentcard"
)

// maxCardBytes bounds a fetched card.
const maxCardBytes = 1 << 20

// runCard dispatches "handoff card verify" and "handoff card show".
func runCard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("card: want a subcommand: verify or show")
	}
	switch args[0] {
	case "verify":
		return runCardVerify(ctx, args[1:], stdout)
	case "show":
		return runCardShow(ctx, args[1:], stdout)
	case "-h", "--help", "help":
		printSynopses(stdout, "card")
		return nil
	}
	return usagef("card: unknown subcommand %q (want verify or show)", args[0])
}

// trustFlags choose the keys a card must be signed with.
type trustFlags struct {
	jwks string
	kid  string
}

func addTrustFlags(fs interface {
	StringVar(p *string, name, value, usage string)
}, withKid bool) *trustFlags {
	var t trustFlags
	fs.StringVar(&t.jwks, "jwks", "", "trust only the keys of this JWKS (`URL|FILE`); default: the keys the agent publishes under its own origin")
	if withKid {
		fs.StringVar(&t.kid, "kid", "", "require the signature to be made by the key with this `KID`")
	}
	return &t
}

// cardURL is where the card of the agent at raw lives.
func cardURL(raw string) (*url.URL, error) {
	u, err := parseAgentURL(raw)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(u.Path, ".json") {
		u = u.JoinPath("/.well-known/agent-card.json")
	}
	return u, nil
}

// fetchCard returns the card's bytes and its A2A 1.0 form.
func fetchCard(ctx context.Context, u *url.URL) ([]byte, *a2a.AgentCard, error) {
	ctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("get card %s: %w", u.Redacted(), err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("get card %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("get card %s: HTTP %s", u.Redacted(), resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes))
	if err != nil {
		return nil, nil, fmt.Errorf("get card %s: %w", u.Redacted(), err)
	}
	card, err := agentcard.ParseCard(b)
	if err != nil {
		return nil, nil, fmt.Errorf("card %s: %w", u.Redacted(), err)
	}
	return b, card, nil
}

// policy builds the trust policy the flags ask for: pinned keys from
// --jwks, else the JWKS published under the card's own origin.
func (t *trustFlags) policy(ctx context.Context, card *url.URL) (agentcard.TrustPolicy, error) {
	if t.jwks == "" {
		origin := &url.URL{Scheme: card.Scheme, Host: card.Host, Path: "/"}
		return agentcard.TrustPolicy{JKUPrefixes: []string{origin.String()}}, nil
	}
	var b []byte
	var err error
	if strings.HasPrefix(t.jwks, "http://") || strings.HasPrefix(t.jwks, "https://") {
		b, err = fetchJWKS(ctx, t.jwks)
	} else {
		b, err = os.ReadFile(t.jwks)
	}
	if err != nil {
		return agentcard.TrustPolicy{}, fmt.Errorf("read --jwks: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return agentcard.TrustPolicy{}, fmt.Errorf("read --jwks %s: not a JWKS: %w", t.jwks, err)
	}
	return agentcard.TrustPolicy{Keys: set}, nil
}

func fetchJWKS(ctx context.Context, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxCardBytes))
}

// verify checks card under the flags' policy and returns the signing kid.
func (t *trustFlags) verify(ctx context.Context, at *url.URL, card *a2a.AgentCard) (string, error) {
	policy, err := t.policy(ctx, at)
	if err != nil {
		return "", err
	}
	v, err := agentcard.NewVerifier(policy, agentcard.WithFetchTimeout(10*time.Second))
	if err != nil {
		return "", err
	}
	kid, err := v.Verify(ctx, card)
	if err != nil {
		return "", err
	}
	if t.kid != "" && kid != t.kid {
		return "", fmt.Errorf("signed by key %q, not by --kid %q", kid, t.kid)
	}
	return kid, nil
}

// errNotVerified makes "card verify" exit 1 after printing its reason.
var errNotVerified = errors.New("card not verified")

func runCardVerify(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("card verify", stdout)
	trust := addTrustFlags(fs, true)
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("card verify: want one URL (the agent's base URL or its card's URL)")
	}
	u, err := cardURL(rest[0])
	if err != nil {
		return err
	}
	_, card, err := fetchCard(ctx, u)
	if err != nil {
		return err
	}
	kid, err := trust.verify(ctx, u, card)
	if err != nil {
		fmt.Fprintf(stdout, "NOT VERIFIED: %v\n", err)
		return fmt.Errorf("%w: %v", errNotVerified, err)
	}
	fmt.Fprintf(stdout, "verified: signed by key %s\n", kid)
	return nil
}

func runCardShow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("card show", stdout)
	trust := addTrustFlags(fs, false)
	asJSON := fs.Bool("json", false, "print the card as served, on one line, and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("card show: want one URL")
	}
	u, err := cardURL(rest[0])
	if err != nil {
		return err
	}
	raw, card, err := fetchCard(ctx, u)
	if err != nil {
		return err
	}
	if *asJSON {
		// Compacted, not re-encoded: the card as the agent served it,
		// which decoding would reorder and re-escape.
		var line bytes.Buffer
		if err := json.Compact(&line, raw); err != nil {
			return fmt.Errorf("card %s: %w", u.Redacted(), err)
		}
		line.WriteByte('\n')
		_, err = line.WriteTo(stdout)
		return err
	}
	state := "verified, signed by key "
	if kid, err := trust.verify(ctx, u, card); err != nil {
		state = "NOT VERIFIED: " + err.Error()
	} else {
		state += kid
	}
	writeField(stdout, "name", card.Name)
	writeField(stdout, "description", card.Description)
	writeField(stdout, "version", card.Version)
	writeField(stdout, "signature", state)
	for _, i := range card.SupportedInterfaces {
		writeField(stdout, "interface", fmt.Sprintf("%s %s %s", i.ProtocolBinding, i.ProtocolVersion, i.URL))
	}
	caps := card.Capabilities
	writeField(stdout, "capabilities", fmt.Sprintf("streaming=%t push=%t extended-card=%t", caps.Streaming, caps.PushNotifications, caps.ExtendedAgentCard))
	for name, s := range card.SecuritySchemes {
		writeField(stdout, "security", fmt.Sprintf("%s: %s", name, schemeSummary(s)))
	}
	for _, s := range card.Skills {
		writeField(stdout, "skill", fmt.Sprintf("%s (%s): %s", s.ID, s.Name, s.Description))
	}
	return nil
}

func schemeSummary(s a2a.SecurityScheme) string {
	switch v := s.(type) {
	case a2a.APIKeySecurityScheme:
		return fmt.Sprintf("API key in %s %s", v.Location, v.Name)
	case a2a.HTTPAuthSecurityScheme:
		return fmt.Sprintf("HTTP %s %s", v.Scheme, v.BearerFormat)
	}
	return fmt.Sprintf("%T", s)
}
