package a2ahttp

import (
	"context"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/internal/auth"
)

// Face is one agent's A2A HTTP face. Each method returns the handler of
// routes of the agent's mux: behind the caller check (on headers, before
// any of a body is read) and, on the routes that read a body, within the
// body limits, each refusal written in the route's own binding. One Face
// holds one in-flight body budget, shared by all its routes.
type Face struct {
	h      a2asrv.RequestHandler
	authn  *auth.Authenticator
	cfg    config
	bodies bodyLimits
}

// New returns the face of h, whose callers authn checks. h should be a
// [CallerHandler] over the engine, so that the principal the check finds
// reaches it.
func New(h a2asrv.RequestHandler, authn *auth.Authenticator, opts ...Option) *Face {
	c := newConfig(opts)
	return &Face{h: h, authn: authn, cfg: c,
		bodies: bodyLimits{max: c.maxBody, timeout: c.bodyTime, budget: newBodyBudget(c.inflight)}}
}

// JSONRPC serves the JSON-RPC binding: A2A 1.0, or 0.3, by the A2A-Version
// header (an unknown version is answered -32009). SendMessage,
// SendStreamingMessage, SubscribeToTask and GetTask of 1.0 take the fast
// path of streamJSONRPC; every other request, and every answer the fast path
// leaves, is a2a-go's.
func (f *Face) JSONRPC() http.Handler {
	h := f.Observed("jsonrpc")
	return authenticate(f.authn, bindingJSONRPC, limitBody(f.bodies, true, jsonrpcMend(versioned(
		streamJSONRPC(h), a2av0.NewJSONRPCHandler(h), true))))
}

// REST serves the HTTP+JSON binding under prefix: A2A 1.0, or 0.3 by the
// A2A-Version header, the 0.3 one under prefix/v1 as the 0.3 specification
// and the JS and Python SDKs speak it and on the bare paths in a2a-go's own
// dialect. A stream that fails before its first event is answered with an
// HTTP error.
func (f *Face) REST(prefix string) http.Handler {
	h := f.Observed("rest")
	return authenticate(f.authn, bindingREST, limitBody(f.bodies, false, restDeleteBody(versioned(
		sseErrorAsHTTP(http.StripPrefix(prefix, a2asrv.NewRESTHandler(h))),
		http.StripPrefix(prefix, rest03Routes(h)), false))))
}

// GRPC puts h, the gRPC binding's handler, behind the caller check, with
// refusals in connect's error format. Its bodies are connect's to bound
// (connect.WithReadMaxBytes).
func (f *Face) GRPC(h http.Handler) http.Handler { return authenticate(f.authn, bindingConnect, h) }

// Authenticated puts h, a route of the agent's own (its admin endpoints,
// its blobs), behind the caller check, with refusals in the REST binding's
// error format. h reads the principal with [auth.PrincipalFrom].
func (f *Face) Authenticated(h http.Handler) http.Handler {
	return authenticate(f.authn, bindingREST, h)
}

// MCP puts h, the agent's MCP face, behind the caller check (401 with a
// JSON-RPC error body) and within the body limits, before the MCP SDK reads
// a request. Each tool call is bound to its own request's caller by
// [Face.Caller], so a session id carries no identity.
func (f *Face) MCP(h http.Handler) http.Handler {
	return mcpAuthenticate(f.authn, limitBody(f.bodies, true, h))
}

// Caller returns ctx with the principal the headers of one MCP request
// name, or the refusal of those headers (an mcp.CallerFunc).
func (f *Face) Caller(ctx context.Context, header http.Header) (context.Context, error) {
	r := (&http.Request{Header: header}).WithContext(ctx)
	p, err := f.authn.Authenticate(r)
	if err != nil {
		return ctx, err
	}
	return auth.WithPrincipal(ctx, p), nil // nil p: anonymous, never a stale caller
}

// Outermost wraps the agent's whole mux: each request is logged once, at
// debug level (method, path, status, duration; never headers or bodies),
// a2a-go's transports log through the face's logger, every response write
// must make progress within the write stall (see [WithWriteStall]), and an
// HTTP/1 answer written while its request's body is unread closes its
// connection.
func (f *Face) Outermost(mux http.Handler) http.Handler {
	return guardResponses(f.cfg.writeStall, logRequests(f.cfg.log, mux))
}
