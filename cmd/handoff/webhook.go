package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/handoff-a2a/handoff/push/webhook"
)

// webhookShutdownGrace is how long a stopping receiver lets requests in
// flight finish.
const webhookShutdownGrace = 5 * time.Second

// runWebhook dispatches "handoff webhook listen".
func runWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("webhook: want a subcommand: listen")
	}
	switch args[0] {
	case "listen":
		return runWebhookListen(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		printSynopses(stdout, "webhook")
		return nil
	}
	return usagef("webhook: unknown subcommand %q (want listen)", args[0])
}

// runWebhookListen receives push notifications until ctx ends. It verifies
// each delivery against the agent's JWKS and prints the verified ones to
// stdout, one JSON object per line; refusals get 401 and a line on stderr.
// Its first line on stderr is "listening on HOST:PORT", the bound address.
func runWebhookListen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("webhook listen", stdout)
	addr := fs.String("addr", "127.0.0.1:9000", "TCP `ADDR` to listen on; port 0 picks a free port")
	agent := fs.String("agent", "", "the agent's base `URL`; its keys are read from URL/.well-known/jwks.json (required)")
	path := fs.String("path", "/", "the URL `PATH` deliveries are posted to")
	token := fs.String("token", os.Getenv("HANDOFF_WEBHOOK_TOKEN"), "require this notification `TOKEN`, the push config's (default $HANDOFF_WEBHOOK_TOKEN)")
	audience := fs.String("audience", "", "the push config's webhook `URL`, which deliveries are signed for; "+
		"default http://ADDR/PATH with the host of --addr as written and the bound port. Set it when the agent reaches this "+
		"receiver by another name, through a proxy or over https")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("webhook listen: unexpected argument %q", rest[0])
	}
	if *agent == "" {
		return usagef("webhook listen: --agent is required")
	}
	base, err := parseAgentURL(*agent)
	if err != nil {
		return err
	}
	// The card URL names the agent as well as its base URL does.
	base.Path = strings.TrimSuffix(base.Path, "/.well-known/agent-card.json")
	jwksURL := base.JoinPath("/.well-known/jwks.json").String()
	if !strings.HasPrefix(*path, "/") {
		return usagef("webhook listen: --path must start with /")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usagef("webhook listen: --addr %q is not HOST:PORT", *addr)
	}
	if ip := net.ParseIP(host); *audience == "" && (host == "" || (ip != nil && ip.IsUnspecified())) {
		return usagef("webhook listen: --addr %s listens on every interface, so the URL the agent posts to is unknown: pass --audience", *addr)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	if *audience == "" {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		*audience = (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: *path}).String()
	}
	fmt.Fprintf(stderr, "listening on %s\n", ln.Addr())
	fmt.Fprintf(stderr, "accepting deliveries signed for %s by the keys at %s\n", *audience, jwksURL)

	logger := slog.New(slog.NewTextHandler(stderr, nil))
	opts := []webhook.Option{webhook.WithLogger(logger)}
	if *token != "" {
		opts = append(opts, webhook.WithToken(*token))
	}
	verified := webhook.NewVerifier(jwksURL, *audience, opts...).Middleware(&eventPrinter{w: stdout})
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != *path {
				http.NotFound(w, r)
				return
			}
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				http.Error(w, "deliveries are POSTed", http.StatusMethodNotAllowed)
				return
			}
			verified.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("webhook: serve: %w", err)
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhookShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(drain); err != nil {
		return fmt.Errorf("webhook: shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("webhook: serve: %w", err)
	}
	return nil
}

// eventPrinter writes each verified delivery as one JSON line.
type eventPrinter struct {
	mu sync.Mutex // deliveries arrive concurrently; lines must not interleave
	w  io.Writer
}

// webhookEvent is one line of "webhook listen" output.
type webhookEvent struct {
	DeliveryID string          `json:"delivery_id"`
	TaskID     string          `json:"task_id"`
	KeyID      string          `json:"kid"`
	Event      json.RawMessage `json:"event"`
}

func (p *eventPrinter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, ok := webhook.VerifiedFrom(r.Context())
	if !ok { // only reachable through the Verifier's middleware
		http.Error(w, "delivery not verified", http.StatusInternalServerError)
		return
	}
	if !json.Valid(d.Body) {
		http.Error(w, "the event is not JSON", http.StatusBadRequest)
		return
	}
	// Marshal compacts the raw event, so the object stays on one line.
	line, err := json.Marshal(webhookEvent{DeliveryID: d.DeliveryID, TaskID: d.TaskID, KeyID: d.KeyID, Event: d.Body})
	if err != nil {
		http.Error(w, "cannot encode the event", http.StatusInternalServerError)
		return
	}
	p.mu.Lock()
	_, err = p.w.Write(append(line, '\n'))
	p.mu.Unlock()
	if err != nil {
		http.Error(w, "cannot record the event", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
