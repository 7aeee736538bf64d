package handoff

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/push/webhook"
	"github.com/handoff-a2a/handoff/tasks"
)

// PushSignatureExtension is the URI of Handoff's extension declaring that
// push deliveries carry a JWT (header A2A-Push-Signature) signed with a key
// of the agent's JWKS: webhook owners verify without a shared secret.
const PushSignatureExtension = "https://github.com/handoff-a2a/handoff/ext/push-signature/v1"

// pushExtension is the card's declaration of PushSignatureExtension.
func pushExtension(jwks string) a2a.AgentExtension {
	return a2a.AgentExtension{
		URI:         PushSignatureExtension,
		Description: "Push notifications carry a JWT in A2A-Push-Signature (and as the bearer token when the config names no authentication, or Bearer without credentials): iss the agent, aud the webhook URL, iat, exp, jti the delivery id, task_id, body_sha256; verify it with the agent's JWKS.",
		Params:      map[string]any{"header": webhook.HeaderSignature, "jwks": jwks},
	}
}

// startPush runs push delivery until ctx ends. Deliveries are signed as
// issuer (the agent's base URL).
func (a *Agent) startPush(ctx context.Context, issuer string) (wait func()) {
	c := a.cfg.Push
	opts := []push.DispatcherOption{
		push.WithRetries(c.MaxAttempts, c.MaxAge.Duration),
		push.WithBackoff(c.RetryDelay.Duration, 5*time.Minute),
		push.WithTimeout(c.Timeout.Duration),
		push.WithClaimIdle(a.cfg.Store.claimIdle()),
		push.WithLogger(a.log),
	}
	if a.metrics != nil {
		opts = append(opts, push.WithObserver(a.metrics))
	}
	client := a.guard.Client(c.Timeout.Duration)
	if a.tracing != nil { // each delivery a span, its traceparent sent to the webhook
		client.Transport = a.tracing.Transport(client.Transport)
	}
	d := push.NewDispatcher(a.store, push.NewSigner(a.keys, issuer), client, opts...)
	a.dispatcher.Store(d)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(ctx); err != nil {
			a.log.Error("push delivery stopped", slog.Any("error", err))
		}
	}()
	return func() { <-done }
}

// pushStatus answers GET /a2a/push/status: the caller's own push configs
// and where their deliveries stand.
func (a *Agent) pushStatus(w http.ResponseWriter, r *http.Request) {
	owner := tasks.Owner{Principal: tasks.AnonymousPrincipal}
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		owner = tasks.Owner{Principal: "user:" + p.Name, Tenant: p.Tenant}
	}
	st, err := push.Statuses(r.Context(), a.store, &owner)
	if err != nil {
		a.log.Error("push status", slog.Any("error", err))
		http.Error(w, "the push status could not be read", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"configs": st})
}
