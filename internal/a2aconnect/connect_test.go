package a2aconnect_test

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1/pbconv"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

const procedurePrefix = "/lf.a2a.v1.A2AService/"

func pbUserMessage(text string) *a2apb.SendMessageRequest {
	return &a2apb.SendMessageRequest{Message: &a2apb.Message{
		MessageId: a2a.NewMessageID(),
		Role:      a2apb.Role_ROLE_USER,
		Parts:     []*a2apb.Part{{Content: &a2apb.Part_Text{Text: text}}},
	}}
}

// h2cClient speaks HTTP/2 without TLS, as gRPC needs; the default client
// speaks HTTP/1.1, which is enough for Connect and gRPC-Web.
func h2cClient() *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: protocols}}
}

// TestConnectClients drives the handler with connect-go clients in each of
// the three protocols it answers.
func TestConnectClients(t *testing.T) {
	baseURL := startServer(t, newTestHandler(&testExecutor{}))
	clients := []struct {
		name       string
		httpClient *http.Client
		opts       []connect.ClientOption
	}{
		{"connect", http.DefaultClient, nil},
		{"grpc-web", http.DefaultClient, []connect.ClientOption{connect.WithGRPCWeb()}},
		{"grpc", h2cClient(), []connect.ClientOption{connect.WithGRPC()}},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()

			send := connect.NewClient[a2apb.SendMessageRequest, a2apb.SendMessageResponse](
				c.httpClient, baseURL+procedurePrefix+"SendMessage", c.opts...)
			req := connect.NewRequest(pbUserMessage("over " + c.name))
			req.Header().Set(a2a.SvcParamExtensions, testExtension.URI)
			res, err := send.CallUnary(ctx, req)
			if err != nil {
				t.Fatalf("SendMessage() error = %v", err)
			}
			task, err := pbconv.FromProtoTask(res.Msg.GetTask())
			if err != nil {
				t.Fatalf("SendMessage() returned no valid task: %v (%v)", err, res.Msg)
			}
			if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: over "+c.name {
				t.Fatalf("SendMessage() = %s %q, want completed %q", task.Status.State, artifactText(task), "echo: over "+c.name)
			}
			if got := res.Trailer().Values(a2a.SvcParamExtensions); len(got) != 1 || got[0] != testExtension.URI {
				t.Fatalf("SendMessage() %s trailer = %v, want [%s]", a2a.SvcParamExtensions, got, testExtension.URI)
			}

			stream := connect.NewClient[a2apb.SendMessageRequest, a2apb.StreamResponse](
				c.httpClient, baseURL+procedurePrefix+"SendStreamingMessage", c.opts...)
			streamReq := connect.NewRequest(pbUserMessage("streamed"))
			streamReq.Header().Set(a2a.SvcParamExtensions, testExtension.URI)
			events, trailer, err := collect(ctx, stream, streamReq)
			if err != nil {
				t.Fatalf("SendStreamingMessage() error = %v", err)
			}
			if len(events) != 4 {
				t.Fatalf("SendStreamingMessage() got %d events, want 4: %v", len(events), events)
			}
			wantTask(t, events[0], a2a.TaskStateSubmitted)
			wantStatus(t, events[1], a2a.TaskStateWorking)
			if artifact, ok := events[2].(*a2a.TaskArtifactUpdateEvent); !ok || artifact.Artifact.Parts[0].Text() != "echo: streamed" {
				t.Fatalf("events[2] = %#v, want artifact update %q", events[2], "echo: streamed")
			}
			wantStatus(t, events[3], a2a.TaskStateCompleted)
			if got := trailer.Values(a2a.SvcParamExtensions); len(got) != 1 || got[0] != testExtension.URI {
				t.Fatalf("SendStreamingMessage() %s trailer = %v, want [%s]", a2a.SvcParamExtensions, got, testExtension.URI)
			}

			get := connect.NewClient[a2apb.GetTaskRequest, a2apb.Task](
				c.httpClient, baseURL+procedurePrefix+"GetTask", c.opts...)
			_, err = get.CallUnary(ctx, connect.NewRequest(&a2apb.GetTaskRequest{Id: "no-such-task"}))
			wantErrorInfo(t, err, connect.CodeNotFound, "TASK_NOT_FOUND")

			subscribe := connect.NewClient[a2apb.SubscribeToTaskRequest, a2apb.StreamResponse](
				c.httpClient, baseURL+procedurePrefix+"SubscribeToTask", c.opts...)
			_, _, err = collect(ctx, subscribe, connect.NewRequest(&a2apb.SubscribeToTaskRequest{Id: "no-such-task"}))
			wantErrorInfo(t, err, connect.CodeNotFound, "TASK_NOT_FOUND")
		})
	}
}

// collect reads a whole server stream, converting each message to an a2a
// event, and returns the response trailer.
func collect[Req any](ctx context.Context, client *connect.Client[Req, a2apb.StreamResponse], req *connect.Request[Req]) ([]a2a.Event, http.Header, error) {
	stream, err := client.CallServerStream(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	defer stream.Close()
	var events []a2a.Event
	for stream.Receive() {
		event, err := pbconv.FromProtoStreamResponse(stream.Msg())
		if err != nil {
			return nil, nil, err
		}
		events = append(events, event)
	}
	return events, stream.ResponseTrailer(), stream.Err()
}

func wantErrorInfo(t *testing.T, err error, code connect.Code, reason string) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	var connectErr *connect.Error
	if !errors.As(err, &connectErr) {
		t.Fatalf("error = %T, want *connect.Error", err)
	}
	for _, detail := range connectErr.Details() {
		value, err := detail.Value()
		if err != nil {
			t.Fatalf("error detail %s: %v", detail.Type(), err)
		}
		if info, ok := value.(*errdetails.ErrorInfo); ok {
			if info.GetReason() != reason || info.GetDomain() != a2a.ProtocolDomain {
				t.Fatalf("ErrorInfo = %s/%s, want %s/%s", info.GetDomain(), info.GetReason(), a2a.ProtocolDomain, reason)
			}
			return
		}
	}
	t.Fatalf("error %v has no google.rpc.ErrorInfo detail", err)
}

// streamObserver reports, for every SendStreamingMessage call, the state of
// the request context once the handler's event iteration has ended.
type streamObserver struct {
	a2asrv.RequestHandler
	ended chan error
}

func (o *streamObserver) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		defer func() { o.ended <- ctx.Err() }()
		for event, err := range o.RequestHandler.SendStreamingMessage(ctx, req) {
			if !yield(event, err) {
				return
			}
		}
	}
}

// TestStreamStopsWhenClientLeaves checks that a stream on a task that would
// never finish is released as soon as the client goes away.
func TestStreamStopsWhenClientLeaves(t *testing.T) {
	observer := &streamObserver{RequestHandler: newTestHandler(&testExecutor{}), ended: make(chan error, 1)}
	baseURL := startServer(t, observer)
	stream := connect.NewClient[a2apb.SendMessageRequest, a2apb.StreamResponse](
		http.DefaultClient, baseURL+procedurePrefix+"SendStreamingMessage")

	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	res, err := stream.CallServerStream(ctx, connect.NewRequest(pbUserMessage(waitText)))
	if err != nil {
		t.Fatalf("SendStreamingMessage() error = %v", err)
	}
	if !res.Receive() {
		t.Fatalf("SendStreamingMessage() no first event: %v", res.Err())
	}
	taskID := res.Msg().GetTask().GetId()
	if !res.Receive() || res.Msg().GetStatusUpdate().GetStatus().GetState() != a2apb.TaskState_TASK_STATE_WORKING {
		t.Fatalf("SendStreamingMessage() second event = %v, %v, want working update", res.Msg(), res.Err())
	}

	leave()
	if err := within(t, observer.ended, "the handler to stop streaming"); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream ended with request context error %v, want %v", err, context.Canceled)
	}
	_ = res.Close()

	// The task itself outlives the stream; cancel it to end the executor.
	cancelTask := connect.NewClient[a2apb.CancelTaskRequest, a2apb.Task](
		http.DefaultClient, baseURL+procedurePrefix+"CancelTask")
	canceled, err := cancelTask.CallUnary(t.Context(), connect.NewRequest(&a2apb.CancelTaskRequest{Id: taskID}))
	if err != nil {
		t.Fatalf("CancelTask() error = %v", err)
	}
	if got := canceled.Msg.GetStatus().GetState(); got != a2apb.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("CancelTask() state = %s, want canceled", got)
	}
}

// stubbornHandler streams from an iterator that ignores its context: after
// the first event it waits for the client to leave, then offers a second
// event and reports whether the stream asked it to stop.
type stubbornHandler struct {
	a2asrv.RequestHandler
	stopped chan bool
}

func (h stubbornHandler) SendStreamingMessage(ctx context.Context, _ *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("first")), nil) {
			h.stopped <- false
			return
		}
		<-ctx.Done()
		h.stopped <- !yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("second")), nil)
	}
}

// TestStreamStopsIteratorIgnoringContext checks that once the client is gone
// the next event ends the iteration instead of being sent.
func TestStreamStopsIteratorIgnoringContext(t *testing.T) {
	handler := stubbornHandler{stopped: make(chan bool, 1)}
	baseURL := startServer(t, handler)
	stream := connect.NewClient[a2apb.SendMessageRequest, a2apb.StreamResponse](
		http.DefaultClient, baseURL+procedurePrefix+"SendStreamingMessage")

	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	res, err := stream.CallServerStream(ctx, connect.NewRequest(pbUserMessage("hi")))
	if err != nil {
		t.Fatalf("SendStreamingMessage() error = %v", err)
	}
	if !res.Receive() || res.Msg().GetMessage().GetParts()[0].GetText() != "first" {
		t.Fatalf("SendStreamingMessage() first event = %v, %v, want message %q", res.Msg(), res.Err(), "first")
	}
	leave()
	if !within(t, handler.stopped, "the second event") {
		t.Fatal("the handler kept streaming after the client left")
	}
	_ = res.Close()
}
