package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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

// pushRetryRequest is the body of POST /a2a/push/retry.
type pushRetryRequest struct {
	TaskID   a2a.TaskID `json:"task_id"`
	ConfigID string     `json:"config_id"`
	// Seq is the event; 0 or absent: every dead letter of the config and
	// the event being retried.
	Seq uint64 `json:"seq"`
}

// pushRetry answers POST /a2a/push/retry ("handoff push retry", the
// console's "Retry now"): the caller asks for a dead letter of one of its
// own push configs to be sent once more, or for the event being retried to
// be tried now. Only the task's owner may, as only the owner sees the
// config in GET /a2a/push/status; another's config is not found. The
// request is stored and the delivery worker sends it (push.Dispatcher.Retry),
// so the answer, 202, says it was accepted, not delivered.
func (a *Agent) pushRetry(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		http.Error(w, "send the request as JSON (Content-Type: application/json)", http.StatusUnsupportedMediaType)
		return
	}
	var in pushRetryRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		http.Error(w, fmt.Sprintf("the request is not a retry object ({task_id, config_id, seq}): %v", err), http.StatusBadRequest)
		return
	}
	if in.TaskID == "" || in.ConfigID == "" {
		http.Error(w, "task_id and config_id are required", http.StatusBadRequest)
		return
	}
	d := a.dispatcher.Load()
	if d == nil {
		http.Error(w, "push delivery is not running", http.StatusServiceUnavailable)
		return
	}
	operator := callerName(r.Context())
	if operator == "" {
		operator = tasks.AnonymousPrincipal
	}
	req, err := d.Retry(r.Context(), callerOwner(r.Context()), in.TaskID, in.ConfigID, in.Seq, operator)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		http.Error(w, fmt.Sprintf("no push config %q of task %s for this caller", in.ConfigID, in.TaskID), http.StatusNotFound)
		return
	case errors.Is(err, push.ErrNothingToRetry):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		a.log.Error("push retry", slog.String("task_id", string(in.TaskID)), slog.Any("error", err))
		http.Error(w, "the retry could not be stored", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{"task_id": in.TaskID, "config_id": in.ConfigID, "retry": req})
}
