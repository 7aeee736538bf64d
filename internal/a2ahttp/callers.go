package a2ahttp

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/tasks"
)

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
				WriteRESTError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "UNAUTHENTICATED", msg)
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

// CallerHandler hands the authenticated principal to a2a-go's call context
// and calls the engine. It stands where a2asrv.InterceptedHandler would: that
// one also builds a logger and a random request id for every call, which
// showed on the hot path, and Handoff needs neither (requests are logged
// once, at the edge). Every transport of the agent (JSON-RPC, REST, gRPC,
// the MCP face) calls the engine through it.
type CallerHandler struct {
	next a2asrv.RequestHandler
	// receive checks a message before the engine sees it (the delegation envelope).
	receive func(*a2a.Message) error
}

var _ a2asrv.RequestHandler = CallerHandler{}

// NewCallerHandler returns next behind the principal's call context. receive,
// when not nil, checks each message sent before next sees it; its error is
// the answer.
func NewCallerHandler(next a2asrv.RequestHandler, receive func(*a2a.Message) error) CallerHandler {
	return CallerHandler{next: next, receive: receive}
}

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

// GetTask implements [a2asrv.RequestHandler].
func (h CallerHandler) GetTask(ctx context.Context, r *a2a.GetTaskRequest) (*a2a.Task, error) {
	return h.next.GetTask(withCaller(ctx), r)
}

// ListTasks implements [a2asrv.RequestHandler].
func (h CallerHandler) ListTasks(ctx context.Context, r *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return h.next.ListTasks(withCaller(ctx), r)
}

// CancelTask implements [a2asrv.RequestHandler].
func (h CallerHandler) CancelTask(ctx context.Context, r *a2a.CancelTaskRequest) (*a2a.Task, error) {
	return h.next.CancelTask(withCaller(ctx), r)
}

// SendMessage implements [a2asrv.RequestHandler].
func (h CallerHandler) SendMessage(ctx context.Context, r *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	if r != nil && r.Message != nil && h.receive != nil {
		if err := h.receive(r.Message); err != nil {
			return nil, err
		}
	}
	return h.next.SendMessage(withCaller(ctx), r)
}

// SubscribeToTask implements [a2asrv.RequestHandler].
func (h CallerHandler) SubscribeToTask(ctx context.Context, r *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return h.next.SubscribeToTask(withCaller(ctx), r)
}

// SendStreamingMessage implements [a2asrv.RequestHandler].
func (h CallerHandler) SendStreamingMessage(ctx context.Context, r *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
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
func (h CallerHandler) SendStreamingMessageWithFlush(ctx context.Context, r *a2a.SendMessageRequest, flush func()) iter.Seq2[a2a.Event, error] {
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

// GetTaskPushConfig implements [a2asrv.RequestHandler].
func (h CallerHandler) GetTaskPushConfig(ctx context.Context, r *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return h.next.GetTaskPushConfig(withCaller(ctx), r)
}

// ListTaskPushConfigs implements [a2asrv.RequestHandler].
func (h CallerHandler) ListTaskPushConfigs(ctx context.Context, r *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return h.next.ListTaskPushConfigs(withCaller(ctx), r)
}

// CreateTaskPushConfig implements [a2asrv.RequestHandler].
func (h CallerHandler) CreateTaskPushConfig(ctx context.Context, r *a2a.PushConfig) (*a2a.PushConfig, error) {
	return h.next.CreateTaskPushConfig(withCaller(ctx), r)
}

// DeleteTaskPushConfig implements [a2asrv.RequestHandler].
func (h CallerHandler) DeleteTaskPushConfig(ctx context.Context, r *a2a.DeleteTaskPushConfigRequest) error {
	return h.next.DeleteTaskPushConfig(withCaller(ctx), r)
}

// GetExtendedAgentCard implements [a2asrv.RequestHandler].
func (h CallerHandler) GetExtendedAgentCard(ctx context.Context, r *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return h.next.GetExtendedAgentCard(withCaller(ctx), r)
}

// mcpAuthenticate refuses MCP requests without acceptable credentials with
// 401 and a JSON-RPC error body, before the SDK reads them.
func mcpAuthenticate(a *auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.Authenticate(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{
				"jsonrpc": "2.0", "id": nil,
				"error": map[string]any{"code": -32001, "message": err.Error()},
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}
