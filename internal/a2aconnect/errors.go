package a2aconnect

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"github.com/a2aproject/a2a-go/v2/log"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// errorCodes is the one table from a2a errors to status codes, the same as
// a2a-go's gRPC server uses. Order matters: the first entry the error wraps
// wins, and a2a-go's gRPC client resolves a code shared by several entries
// through the ErrorInfo reason attached to the error.
var errorCodes = []struct {
	err  error
	code connect.Code
}{
	{a2a.ErrTaskNotFound, connect.CodeNotFound},
	{a2a.ErrTaskNotCancelable, connect.CodeFailedPrecondition},
	{a2a.ErrUnsupportedOperation, connect.CodeFailedPrecondition},
	{a2a.ErrInvalidParams, connect.CodeInvalidArgument},
	{a2a.ErrInternalError, connect.CodeInternal},
	{a2a.ErrUnauthenticated, connect.CodeUnauthenticated},
	{a2a.ErrUnauthorized, connect.CodePermissionDenied},
	{context.Canceled, connect.CodeCanceled},
	{context.DeadlineExceeded, connect.CodeDeadlineExceeded},
	{a2a.ErrExtendedCardNotConfigured, connect.CodeFailedPrecondition},
	{a2a.ErrPushNotificationNotSupported, connect.CodeFailedPrecondition},
	{a2a.ErrMethodNotFound, connect.CodeUnimplemented},
	{a2a.ErrUnsupportedContentType, connect.CodeInvalidArgument},
	{a2a.ErrInvalidRequest, connect.CodeInvalidArgument},
	{a2a.ErrInvalidAgentResponse, connect.CodeInternal},
	{a2a.ErrExtensionSupportRequired, connect.CodeFailedPrecondition},
	{a2a.ErrVersionNotSupported, connect.CodeUnimplemented}, // spec 5.4
	{a2a.ErrParseError, connect.CodeInvalidArgument},
	{a2a.ErrServerError, connect.CodeInternal},
}

// toConnectError turns an error from the a2asrv handler into the error sent
// to the client. Errors wrapping an a2a sentinel keep their message, which
// a2a handlers write for clients. Context errors keep only their code: the
// chain around them describes the server's own calls. Anything else may carry
// internals, so it is logged and replaced by a generic internal error.
func toConnectError(ctx context.Context, err error) error {
	for _, entry := range errorCodes {
		if !errors.Is(err, entry.err) {
			continue
		}
		public := err
		if entry.err == context.Canceled || entry.err == context.DeadlineExceeded {
			public = entry.err
		}
		connectErr := connect.NewError(entry.code, public)
		addDetails(ctx, connectErr, a2a.ErrorReason(entry.err), err)
		return connectErr
	}
	return internalError(ctx, "handle request", err)
}

// invalidRequest reports a request message the converters rejected; the
// cause describes the client's own input, so it is sent back.
func invalidRequest(ctx context.Context, err error) error {
	connectErr := connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid request: %w", err))
	addDetails(ctx, connectErr, a2a.ErrorReason(a2a.ErrInvalidParams), nil)
	return connectErr
}

// internalError logs err and returns an internal error that reveals nothing
// about it.
func internalError(ctx context.Context, op string, err error) error {
	log.Error(ctx, "a2aconnect: failed to "+op, err)
	connectErr := connect.NewError(connect.CodeInternal, a2a.ErrInternalError)
	addDetails(ctx, connectErr, a2a.ErrorReason(a2a.ErrInternalError), nil)
	return connectErr
}

// addDetails attaches the status details a2a-go's gRPC server sends: the
// Details and typed details of an *a2a.Error as google.protobuf.Struct, and
// last a google.rpc.ErrorInfo with the A2A reason, from which a2a-go's client
// recovers the sentinel error.
func addDetails(ctx context.Context, connectErr *connect.Error, reason string, err error) {
	info := &errdetails.ErrorInfo{Reason: reason, Domain: a2a.ProtocolDomain}
	var msgs []proto.Message
	if a2aErr, ok := errors.AsType[*a2a.Error](err); ok {
		if len(a2aErr.Details) > 0 {
			msgs = appendStruct(ctx, msgs, a2aErr.Details)
		}
		for _, detail := range a2aErr.TypedDetails {
			if detail.TypeURL == errordetails.ErrorInfoType {
				info.Metadata = stringMap(detail.Value["metadata"])
				continue
			}
			msgs = appendStruct(ctx, msgs, detail.Value)
		}
	}
	for _, msg := range append(msgs, info) {
		detail, detailErr := connect.NewErrorDetail(msg)
		if detailErr != nil {
			log.Warn(ctx, "a2aconnect: dropped error detail", "error", detailErr)
			continue
		}
		connectErr.AddDetail(detail)
	}
}

// appendStruct adds value as a google.protobuf.Struct; values that have no
// Struct form are dropped, as a2a-go's gRPC server does.
func appendStruct(ctx context.Context, msgs []proto.Message, value map[string]any) []proto.Message {
	s, err := structpb.NewStruct(value)
	if err != nil {
		log.Warn(ctx, "a2aconnect: dropped error detail", "error", err)
		return msgs
	}
	return append(msgs, s)
}

// stringMap reads ErrorInfo metadata, which is a map[string]string when set
// with a2a.Error.WithErrorInfoMeta and a map[string]any after decoding JSON.
func stringMap(raw any) map[string]string {
	switch m := raw.(type) {
	case map[string]string:
		return m
	case map[string]any:
		out := make(map[string]string, len(m))
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
		return out
	}
	return nil
}
