package a2aconnect

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1/pbconv"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
)

// NewHandler returns the path prefix of lf.a2a.v1.A2AService
// ("/lf.a2a.v1.A2AService/") and an http.Handler serving every method of the
// service over gRPC, gRPC-Web and the Connect protocol by delegating to h.
// Mount it with mux.Handle(NewHandler(h)). opts apply to every method, e.g.
// interceptors or read limits. gRPC needs HTTP/2, so serve it over TLS or h2c.
func NewHandler(h a2asrv.RequestHandler, opts ...connect.HandlerOption) (path string, handler http.Handler) {
	svc := service{desc: a2apb.File_a2av1_proto.Services().ByName("A2AService"), opts: opts}
	mux := http.NewServeMux()

	mux.Handle(unary(svc, "SendMessage",
		pbconv.FromProtoSendMessageRequest, h.SendMessage, pbconv.ToProtoSendMessageResponse))
	mux.Handle(stream(svc, "SendStreamingMessage",
		pbconv.FromProtoSendMessageRequest, h.SendStreamingMessage))
	mux.Handle(unary(svc, "GetTask",
		pbconv.FromProtoGetTaskRequest, h.GetTask, pbconv.ToProtoTask))
	mux.Handle(unary(svc, "ListTasks",
		pbconv.FromProtoListTasksRequest, h.ListTasks, pbconv.ToProtoListTasksResponse))
	mux.Handle(unary(svc, "CancelTask",
		pbconv.FromProtoCancelTaskRequest, h.CancelTask, pbconv.ToProtoTask))
	mux.Handle(stream(svc, "SubscribeToTask",
		pbconv.FromProtoSubscribeToTaskRequest, h.SubscribeToTask))
	mux.Handle(unary(svc, "CreateTaskPushNotificationConfig",
		pbconv.FromProtoTaskPushConfig, h.CreateTaskPushConfig, pbconv.ToProtoTaskPushConfig))
	mux.Handle(unary(svc, "GetTaskPushNotificationConfig",
		pbconv.FromProtoGetTaskPushConfigRequest, h.GetTaskPushConfig, pbconv.ToProtoTaskPushConfig))
	mux.Handle(unary(svc, "ListTaskPushNotificationConfigs",
		pbconv.FromProtoListTaskPushConfigRequest, h.ListTaskPushConfigs, pbconv.ToProtoListTaskPushConfigResponse))
	mux.Handle(unary(svc, "DeleteTaskPushNotificationConfig",
		pbconv.FromProtoDeleteTaskPushConfigRequest,
		func(ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) (struct{}, error) {
			return struct{}{}, h.DeleteTaskPushConfig(ctx, req)
		},
		func(struct{}) (*emptypb.Empty, error) { return &emptypb.Empty{}, nil }))
	mux.Handle(unary(svc, "GetExtendedAgentCard",
		pbconv.FromProtoGetExtendedAgentCardRequest, h.GetExtendedAgentCard, pbconv.ToProtoAgentCard))

	return svc.prefix(), mux
}

// service names the procedures of A2AService and carries the caller's
// handler options.
type service struct {
	desc protoreflect.ServiceDescriptor
	opts []connect.HandlerOption
}

func (s service) prefix() string { return "/" + string(s.desc.FullName()) + "/" }

// method returns the procedure of the named method and its handler options;
// the schema lets interceptors see the method descriptor, as with generated
// connect code.
func (s service) method(name protoreflect.Name) (string, []connect.HandlerOption) {
	schema := connect.WithSchema(s.desc.Methods().ByName(name))
	return s.prefix() + string(name), append([]connect.HandlerOption{schema}, s.opts...)
}

// unary wires one request-response method: proto request to a2a request,
// the call on the a2asrv handler, a2a result back to proto.
func unary[PReq, PRes, Req, Res any](
	s service, name protoreflect.Name,
	fromProto func(*PReq) (Req, error),
	call func(context.Context, Req) (Res, error),
	toProto func(Res) (*PRes, error),
) (string, http.Handler) {
	procedure, opts := s.method(name)
	return procedure, connect.NewUnaryHandlerSimple(procedure, func(ctx context.Context, pbReq *PReq) (*PRes, error) {
		if err := checkVersion(ctx); err != nil {
			return nil, toConnectError(ctx, err)
		}
		req, err := fromProto(pbReq)
		if err != nil {
			return nil, invalidRequest(ctx, err)
		}
		ctx, callCtx := withCallContext(ctx)
		res, err := call(ctx, req)
		if err != nil {
			return nil, toConnectError(ctx, err)
		}
		pbRes, err := toProto(res)
		if err != nil {
			return nil, internalError(ctx, "convert response", err)
		}
		setExtensionsTrailer(ctx, callCtx)
		return pbRes, nil
	}, opts...)
}

// stream wires one server-streaming method. Each event is sent as soon as the
// handler yields it; a failed send or a gone client ends the iteration, which
// releases the handler's resources.
func stream[PReq, Req any](
	s service, name protoreflect.Name,
	fromProto func(*PReq) (Req, error),
	call func(context.Context, Req) iter.Seq2[a2a.Event, error],
) (string, http.Handler) {
	procedure, opts := s.method(name)
	return procedure, connect.NewServerStreamHandlerSimple(procedure, func(ctx context.Context, pbReq *PReq, out *connect.ServerStream[a2apb.StreamResponse]) error {
		if err := checkVersion(ctx); err != nil {
			return toConnectError(ctx, err)
		}
		req, err := fromProto(pbReq)
		if err != nil {
			return invalidRequest(ctx, err)
		}
		ctx, callCtx := withCallContext(ctx)
		for event, err := range call(ctx, req) {
			if err != nil {
				return toConnectError(ctx, err)
			}
			if err := ctx.Err(); err != nil {
				return toConnectError(ctx, err)
			}
			pbEvent, err := pbconv.ToProtoStreamResponse(event)
			if err != nil {
				return internalError(ctx, "convert event", err)
			}
			if err := out.Send(pbEvent); err != nil {
				return err
			}
		}
		setExtensionsTrailer(ctx, callCtx)
		return nil
	}, opts...)
}

// checkVersion refuses a request whose a2a-version metadata names a version
// other than 1.0, the only one lf.a2a.v1 speaks (0.3 clients call the
// a2a.v1 service). A request without it is taken as 1.0: the service name
// already says which protocol the client speaks.
func checkVersion(ctx context.Context) error {
	info, ok := connect.CallInfoForHandlerContext(ctx)
	if !ok {
		return nil
	}
	switch v := strings.TrimSpace(info.RequestHeader().Get(a2a.SvcParamVersion)); v {
	case "", "1", "1.0", "1.0.0":
		return nil
	default:
		return a2a.NewError(a2a.ErrVersionNotSupported,
			fmt.Sprintf("A2A-Version %q is not supported over gRPC; this service speaks 1.0", v))
	}
}

// withCallContext exposes the request headers to the a2asrv handler as
// service parameters (A2A-Version, A2A-Extensions, auth, ...), like a2a-go's
// gRPC server does with the incoming metadata. The tenant travels in the
// request messages and is carried over by pbconv.
func withCallContext(ctx context.Context) (context.Context, *a2asrv.CallContext) {
	var params *a2asrv.ServiceParams
	if info, ok := connect.CallInfoForHandlerContext(ctx); ok {
		params = a2asrv.NewServiceParams(info.RequestHeader())
	}
	return a2asrv.NewCallContext(ctx, params)
}

// setExtensionsTrailer reports the extensions the handler activated in the
// A2A-Extensions trailer, where a2a-go's gRPC server puts them.
func setExtensionsTrailer(ctx context.Context, callCtx *a2asrv.CallContext) {
	info, ok := connect.CallInfoForHandlerContext(ctx)
	if !ok {
		return
	}
	for _, uri := range callCtx.Extensions().ActivatedURIs() {
		info.ResponseTrailer().Add(a2a.SvcParamExtensions, uri)
	}
}
