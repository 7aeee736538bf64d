package a2aconnect_test

import (
	"strings"
	"testing"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestVersionNegotiation sends the a2a-version metadata a gRPC client may
// set: 1.0 in any spelling (or none) is served, anything else is refused
// with VersionNotSupportedError, as the spec maps it (UNIMPLEMENTED, with an
// ErrorInfo naming the reason), on unary and streaming methods alike.
func TestVersionNegotiation(t *testing.T) {
	baseURL := startServer(t, newTestHandler(&testExecutor{}))
	conn, err := grpc.NewClient(strings.TrimPrefix(baseURL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient() error = %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := a2apb.NewA2AServiceClient(conn)

	for _, tc := range []struct {
		version string // "" sends no metadata
		served  bool
	}{
		{"", true}, {"1.0", true}, {"1", true}, {"1.0.0", true},
		{"0.3", false}, {"2.0", false}, {"1.1", false}, {"banana", false},
	} {
		t.Run("version="+tc.version, func(t *testing.T) {
			ctx := t.Context()
			if tc.version != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "a2a-version", tc.version)
			}
			_, unaryErr := client.GetTask(ctx, &a2apb.GetTaskRequest{Id: "no-such-task"})
			stream, err := client.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: "no-such-task"})
			streamErr := err
			if err == nil {
				_, streamErr = stream.Recv()
			}
			for name, err := range map[string]error{"GetTask": unaryErr, "SubscribeToTask": streamErr} {
				st := status.Convert(err)
				if tc.served {
					if st.Code() != codes.NotFound {
						t.Errorf("%s with a2a-version %q: %v, want NotFound (served)", name, tc.version, err)
					}
					continue
				}
				if st.Code() != codes.Unimplemented {
					t.Errorf("%s with a2a-version %q: code %s (%v), want Unimplemented", name, tc.version, st.Code(), err)
				}
				if !strings.Contains(st.Message(), tc.version) {
					t.Errorf("%s: message %q does not name the version %q", name, st.Message(), tc.version)
				}
				var reason string
				for _, d := range st.Details() {
					if info, ok := d.(*errdetails.ErrorInfo); ok {
						reason = info.Reason
					}
				}
				if reason != "VERSION_NOT_SUPPORTED" {
					t.Errorf("%s: ErrorInfo reason %q, want VERSION_NOT_SUPPORTED (details %v)", name, reason, st.Details())
				}
			}
		})
	}
}
