package handoff

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/tasks"
)

// Security scheme names on the card.
const (
	schemeAPIKey = "apiKey"
	schemeBearer = "bearer"
)

// newAuthenticator builds the caller check from the config's auth section;
// log receives the failures of JWKS fetches.
func newAuthenticator(c *AuthConfig, log *slog.Logger) (*auth.Authenticator, error) {
	a := &auth.Authenticator{Anonymous: c.Anonymous, APIKeyHeader: c.APIKeyHeader}
	for _, k := range c.APIKeys {
		h, err := auth.ParseAPIKeyHash(k.SHA256)
		if err != nil {
			return nil, fmt.Errorf("api key %s: %w", k.Name, err)
		}
		a.APIKeys = append(a.APIKeys, auth.APIKey{Name: k.Name, Tenant: k.Tenant, SHA256: h})
	}
	for _, j := range c.JWTIssuers {
		var keys auth.KeySource
		if j.JWKSFile != "" {
			s, err := auth.LoadJWKSFile(j.JWKSFile)
			if err != nil {
				return nil, fmt.Errorf("issuer %s: %w", j.Issuer, err)
			}
			keys = s
		} else {
			rk := auth.NewRemoteKeys(j.JWKSURL)
			rk.Log = log.With(slog.String("issuer", j.Issuer))
			if j.JWKSMinRefresh != nil {
				rk.MinRefresh = j.JWKSMinRefresh.Duration
			}
			keys = rk
		}
		a.Issuers = append(a.Issuers, auth.Issuer{Issuer: j.Issuer, Audience: j.Audience, Keys: keys,
			Skew: j.ClockSkew.Duration, TenantClaim: j.TenantClaim})
	}
	return a, nil
}

// securitySchemes are the card's schemes and requirements for the config:
// any one of the configured credentials satisfies a request.
func securitySchemes(c *AuthConfig) (a2a.NamedSecuritySchemes, a2a.SecurityRequirementsOptions) {
	schemes := a2a.NamedSecuritySchemes{}
	var reqs a2a.SecurityRequirementsOptions
	if len(c.APIKeys) > 0 {
		schemes[schemeAPIKey] = a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: c.APIKeyHeader,
			Description: "An API key issued by the agent's operator."}
		reqs = append(reqs, a2a.SecurityRequirements{schemeAPIKey: {}})
	}
	if len(c.JWTIssuers) > 0 {
		schemes[schemeBearer] = a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT",
			Description: "A JWT from one of the agent's trusted issuers."}
		reqs = append(reqs, a2a.SecurityRequirements{schemeBearer: {}})
	}
	if len(schemes) == 0 {
		return nil, nil
	}
	if c.Anonymous { // an empty requirement: no credentials is acceptable too
		reqs = append(reqs, a2a.SecurityRequirements{})
	}
	return schemes, reqs
}

// binding is the wire format a refusal must be written in.
type binding int

const (
	bindingJSONRPC binding = iota
	bindingREST
	bindingConnect
)

// authenticate refuses requests without acceptable credentials before they
// reach a transport, in the caller's own protocol, and passes the principal
// on in the request's context.
func authenticate(a *auth.Authenticator, b binding, next http.Handler) http.Handler {
	errWriter := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="a2a"`)
			if r.Body != nil && r.Body != http.NoBody { // its body is never read, and waited for only briefly
				closeUnread(w, r)
			}
			msg := err.Error()
			switch b {
			case bindingJSONRPC:
				writeJSONRPCError(w, http.StatusUnauthorized, nil, -31401, msg) // the body, and the id in it, is not read
			case bindingREST:
				writeRESTError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "UNAUTHENTICATED", msg)
			default:
				_ = errWriter.Write(w, r, connect.NewError(connect.CodeUnauthenticated, errors.New(msg)))
			}
			return
		}
		if p != nil {
			markAuthenticated(r.Context())
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// callerHandler hands the authenticated principal to a2a-go's call context
// and calls the engine. It stands where a2asrv.InterceptedHandler would: that
// one also builds a logger and a random request id for every call, which
// showed on the hot path, and Handoff needs neither (requests are logged
// once, at the edge).
type callerHandler struct {
	next a2asrv.RequestHandler
	// receive checks a message before the engine sees it (the delegation envelope).
	receive func(*a2a.Message) error
}

var _ a2asrv.RequestHandler = callerHandler{}

// withCaller makes sure ctx has a call context whose user is the principal.
func withCaller(ctx context.Context) context.Context {
	cc, ok := a2asrv.CallContextFrom(ctx)
	if !ok {
		ctx, cc = a2asrv.NewCallContext(ctx, nil)
	}
	if p, ok := auth.PrincipalFrom(ctx); ok {
		cc.User = a2asrv.NewAuthenticatedUser(p.Name, map[string]any{tasks.TenantAttribute: p.Tenant})
	}
	return ctx
}

func (h callerHandler) GetTask(ctx context.Context, r *a2a.GetTaskRequest) (*a2a.Task, error) {
	return h.next.GetTask(withCaller(ctx), r)
}

func (h callerHandler) ListTasks(ctx context.Context, r *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return h.next.ListTasks(withCaller(ctx), r)
}

func (h callerHandler) CancelTask(ctx context.Context, r *a2a.CancelTaskRequest) (*a2a.Task, error) {
	return h.next.CancelTask(withCaller(ctx), r)
}

func (h callerHandler) SendMessage(ctx context.Context, r *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if r != nil && r.Message != nil && h.receive != nil {
		if err := h.receive(r.Message); err != nil {
			return nil, err
		}
	}
	return h.next.SendMessage(withCaller(ctx), r)
}

func (h callerHandler) SubscribeToTask(ctx context.Context, r *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return h.next.SubscribeToTask(withCaller(ctx), r)
}

func (h callerHandler) SendStreamingMessage(ctx context.Context, r *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	if r != nil && r.Message != nil && h.receive != nil {
		if err := h.receive(r.Message); err != nil {
			return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
		}
	}
	return h.next.SendStreamingMessage(withCaller(ctx), r)
}

// SendStreamingMessageWithFlush is SendStreamingMessage through the
// engine's flushing stream (see flushingStreamer); a next that has none
// streams without flushing.
func (h callerHandler) SendStreamingMessageWithFlush(ctx context.Context, r *a2a.SendMessageRequest, flush func()) iter.Seq2[a2a.Event, error] {
	fs, ok := h.next.(flushingStreamer)
	if !ok {
		return h.SendStreamingMessage(ctx, r)
	}
	if r != nil && r.Message != nil && h.receive != nil {
		if err := h.receive(r.Message); err != nil {
			return func(yield func(a2a.Event, error) bool) { yield(nil, err) }
		}
	}
	return fs.SendStreamingMessageWithFlush(withCaller(ctx), r, flush)
}

func (h callerHandler) GetTaskPushConfig(ctx context.Context, r *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return h.next.GetTaskPushConfig(withCaller(ctx), r)
}

func (h callerHandler) ListTaskPushConfigs(ctx context.Context, r *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return h.next.ListTaskPushConfigs(withCaller(ctx), r)
}

func (h callerHandler) CreateTaskPushConfig(ctx context.Context, r *a2a.PushConfig) (*a2a.PushConfig, error) {
	return h.next.CreateTaskPushConfig(withCaller(ctx), r)
}

func (h callerHandler) DeleteTaskPushConfig(ctx context.Context, r *a2a.DeleteTaskPushConfigRequest) error {
	return h.next.DeleteTaskPushConfig(withCaller(ctx), r)
}

func (h callerHandler) GetExtendedAgentCard(ctx context.Context, r *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return h.next.GetExtendedAgentCard(withCaller(ctx), r)
}

// extendedCard serves the extended card to authenticated callers only.
func extendedCard(card *a2a.AgentCard) func(context.Context) (*a2a.AgentCard, error) {
	return func(ctx context.Context) (*a2a.AgentCard, error) {
		if _, ok := auth.PrincipalFrom(ctx); !ok {
			return nil, a2a.NewError(a2a.ErrUnauthenticated, "the extended card is for authenticated callers")
		}
		return card, nil
	}
}
