package e2e

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1/pbconv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// transport is one way of talking to the agent, with a2a-go's client on top.
type transport struct {
	name string
	// hasList is false for A2A 0.3, which has no tasks/list method (a2a-go's
	// 0.3 client answers ListTasks with ErrUnsupportedOperation itself).
	hasList bool
	connect func(t *testing.T, card *a2a.AgentCard) *a2aclient.Client
}

// transports are every binding the acceptance list names. Each client is
// made from the interface the agent's own card lists, so the card is checked
// to point at working endpoints too.
var transports = []transport{
	{name: "jsonrpc-1.0", hasList: true, connect: func(t *testing.T, card *a2a.AgentCard) *a2aclient.Client {
		iface := cardInterface(t, card, a2a.TransportProtocolJSONRPC, "1.0")
		return newClient(t, iface, a2aclient.WithJSONRPCTransport(&http.Client{}))
	}},
	{name: "rest-1.0", hasList: true, connect: func(t *testing.T, card *a2a.AgentCard) *a2aclient.Client {
		iface := cardInterface(t, card, a2a.TransportProtocolHTTPJSON, "1.0")
		return newClient(t, iface, a2aclient.WithRESTTransport(&http.Client{}))
	}},
	{name: "grpc-1.0", hasList: true, connect: func(t *testing.T, card *a2a.AgentCard) *a2aclient.Client {
		iface := *cardInterface(t, card, a2a.TransportProtocolGRPC, "1.0")
		// grpc-go dials a host:port target; the card's URL carries the
		// http:// scheme (a2a-go's own CLI strips it the same way).
		iface.URL = strings.TrimPrefix(iface.URL, "http://")
		return newClient(t, &iface, a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}},
	{name: "connect-1.0", hasList: true, connect: func(t *testing.T, card *a2a.AgentCard) *a2aclient.Client {
		iface := cardInterface(t, card, a2a.TransportProtocolGRPC, "1.0")
		return newClient(t, iface, a2aclient.WithTransport(a2a.TransportProtocolGRPC,
			a2aclient.TransportFactoryFn(func(_ context.Context, _ *a2a.AgentCard, iface *a2a.AgentInterface) (a2aclient.Transport, error) {
				return newConnectTransport(http.DefaultClient, iface.URL), nil
			})))
	}},
	{name: "jsonrpc-0.3", hasList: false, connect: func(t *testing.T, card *a2a.AgentCard) *a2aclient.Client {
		iface := cardInterface(t, card, a2a.TransportProtocolJSONRPC, "0.3")
		hc := &http.Client{Transport: withoutVersionHeader{http.DefaultTransport}}
		return newClient(t, iface, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}))
	}},
}

// withoutVersionHeader drops the A2A-Version header a2a-go's client adds,
// so requests look like those of a real 0.3 client: the 1.0 spec says a
// request without the header is 0.3.
type withoutVersionHeader struct{ next http.RoundTripper }

func (w withoutVersionHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Del(a2a.SvcParamVersion)
	return w.next.RoundTrip(r)
}

// fetchCard resolves the agent's card with a2a-go's resolver.
func fetchCard(t *testing.T, a *agent) *a2a.AgentCard {
	t.Helper()
	card, err := agentcard.NewResolver(&http.Client{}).Resolve(callCtx(t), a.base)
	if err != nil {
		t.Fatalf("resolve the agent card: %v", err)
	}
	return card
}

// cardInterface returns the card's interface for binding and version.
func cardInterface(t *testing.T, card *a2a.AgentCard, binding a2a.TransportProtocol, version a2a.ProtocolVersion) *a2a.AgentInterface {
	t.Helper()
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolBinding == binding && iface.ProtocolVersion == version {
			return iface
		}
	}
	t.Fatalf("the card lists no %s %s interface: %+v", binding, version, card.SupportedInterfaces)
	return nil
}

// newClient opens a2a-go's client on exactly one interface with exactly
// the transport given (no defaults to fall back on).
func newClient(t *testing.T, iface *a2a.AgentInterface, opt a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{iface}, a2aclient.WithDefaultsDisabled(), opt)
	if err != nil {
		t.Fatalf("a2aclient.NewFromEndpoints(%s %s %s): %v", iface.ProtocolBinding, iface.ProtocolVersion, iface.URL, err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// jsonrpcClient is the client most tests use when the binding is not the
// point.
func jsonrpcClient(t *testing.T, a *agent) *a2aclient.Client {
	t.Helper()
	return transports[0].connect(t, fetchCard(t, a))
}

// connectTransport is an a2aclient.Transport over connect-go clients in the
// Connect protocol (HTTP/1.1, no gRPC framing), calling the procedures
// /lf.a2a.v1.A2AService/<Method> with a2a-go's own protobuf types. It is
// how a Connect (or browser) client reaches the agent's gRPC service.
type connectTransport struct {
	send      *connect.Client[a2apb.SendMessageRequest, a2apb.SendMessageResponse]
	stream    *connect.Client[a2apb.SendMessageRequest, a2apb.StreamResponse]
	get       *connect.Client[a2apb.GetTaskRequest, a2apb.Task]
	list      *connect.Client[a2apb.ListTasksRequest, a2apb.ListTasksResponse]
	cancel    *connect.Client[a2apb.CancelTaskRequest, a2apb.Task]
	subscribe *connect.Client[a2apb.SubscribeToTaskRequest, a2apb.StreamResponse]
}

var _ a2aclient.Transport = (*connectTransport)(nil)

const procedurePrefix = "/lf.a2a.v1.A2AService/"

func newConnectTransport(hc *http.Client, base string) *connectTransport {
	url := strings.TrimSuffix(base, "/") + procedurePrefix
	return &connectTransport{
		send:      connect.NewClient[a2apb.SendMessageRequest, a2apb.SendMessageResponse](hc, url+"SendMessage"),
		stream:    connect.NewClient[a2apb.SendMessageRequest, a2apb.StreamResponse](hc, url+"SendStreamingMessage"),
		get:       connect.NewClient[a2apb.GetTaskRequest, a2apb.Task](hc, url+"GetTask"),
		list:      connect.NewClient[a2apb.ListTasksRequest, a2apb.ListTasksResponse](hc, url+"ListTasks"),
		cancel:    connect.NewClient[a2apb.CancelTaskRequest, a2apb.Task](hc, url+"CancelTask"),
		subscribe: connect.NewClient[a2apb.SubscribeToTaskRequest, a2apb.StreamResponse](hc, url+"SubscribeToTask"),
	}
}

// request wraps msg with the client's service parameters as headers.
func request[T any](params a2aclient.ServiceParams, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	for k, vs := range params {
		for _, v := range vs {
			req.Header().Add(k, v)
		}
	}
	return req
}

func unary[PReq, PRes, Req, Res any](ctx context.Context, c *connect.Client[PReq, PRes], params a2aclient.ServiceParams, req Req,
	toProto func(Req) (*PReq, error), fromProto func(*PRes) (Res, error)) (Res, error) {
	var zero Res
	pbReq, err := toProto(req)
	if err != nil {
		return zero, err
	}
	res, err := c.CallUnary(ctx, request(params, pbReq))
	if err != nil {
		return zero, err
	}
	return fromProto(res.Msg)
}

func streamEvents[PReq, Req any](ctx context.Context, c *connect.Client[PReq, a2apb.StreamResponse], params a2aclient.ServiceParams, req Req,
	toProto func(Req) (*PReq, error)) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		pbReq, err := toProto(req)
		if err != nil {
			yield(nil, err)
			return
		}
		s, err := c.CallServerStream(ctx, request(params, pbReq))
		if err != nil {
			yield(nil, err)
			return
		}
		defer s.Close()
		for s.Receive() {
			ev, err := pbconv.FromProtoStreamResponse(s.Msg())
			if !yield(ev, err) || err != nil {
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(nil, err)
		}
	}
}

func (c *connectTransport) SendMessage(ctx context.Context, p a2aclient.ServiceParams, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	return unary(ctx, c.send, p, req, pbconv.ToProtoSendMessageRequest, pbconv.FromProtoSendMessageResponse)
}

func (c *connectTransport) SendStreamingMessage(ctx context.Context, p a2aclient.ServiceParams, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return streamEvents(ctx, c.stream, p, req, pbconv.ToProtoSendMessageRequest)
}

func (c *connectTransport) GetTask(ctx context.Context, p a2aclient.ServiceParams, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	return unary(ctx, c.get, p, req, pbconv.ToProtoGetTaskRequest, pbconv.FromProtoTask)
}

func (c *connectTransport) ListTasks(ctx context.Context, p a2aclient.ServiceParams, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return unary(ctx, c.list, p, req, pbconv.ToProtoListTasksRequest, pbconv.FromProtoListTasksResponse)
}

func (c *connectTransport) CancelTask(ctx context.Context, p a2aclient.ServiceParams, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	return unary(ctx, c.cancel, p, req, pbconv.ToProtoCancelTaskRequest, pbconv.FromProtoTask)
}

func (c *connectTransport) SubscribeToTask(ctx context.Context, p a2aclient.ServiceParams, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return streamEvents(ctx, c.subscribe, p, req, pbconv.ToProtoSubscribeToTaskRequest)
}

// The e2e tests do not use the push-config and extended-card methods.
var errNotUsed = errors.New("not used by the e2e tests")

func (c *connectTransport) GetTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, errNotUsed
}

func (c *connectTransport) ListTaskPushConfigs(context.Context, a2aclient.ServiceParams, *a2a.ListTaskPushConfigRequest) ([]*a2a.PushConfig, error) {
	return nil, errNotUsed
}

func (c *connectTransport) CreateTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, errNotUsed
}

func (c *connectTransport) DeleteTaskPushConfig(context.Context, a2aclient.ServiceParams, *a2a.DeleteTaskPushConfigRequest) error {
	return errNotUsed
}

func (c *connectTransport) GetExtendedAgentCard(context.Context, a2aclient.ServiceParams, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, errNotUsed
}

func (c *connectTransport) Destroy() error { return nil }
