package a2aconnect_test

import (
	"context"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/handoff-a2a/handoff/internal/a2aconnect"
)

// waitText makes the test executor keep its task working until it is
// canceled; any other text is echoed back as an artifact.
const waitText = "wait"

// testExecutor completes a task with an "echo: <text>" artifact, or, for
// waitText, stays working until the task is canceled. It records the
// executor context of every task so tests can check what reached the agent.
type testExecutor struct {
	mu   sync.Mutex
	seen map[a2a.TaskID]*a2asrv.ExecutorContext
}

func (e *testExecutor) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	e.mu.Lock()
	if e.seen == nil {
		e.seen = map[a2a.TaskID]*a2asrv.ExecutorContext{}
	}
	e.seen[execCtx.TaskID] = execCtx
	e.mu.Unlock()

	return func(yield func(a2a.Event, error) bool) {
		text := execCtx.Message.Parts[0].Text()
		if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, nil), nil) {
			return
		}
		if text == waitText {
			// Cancellation completes the task, which ends the execution context.
			<-ctx.Done()
			return
		}
		if !yield(a2a.NewArtifactEvent(execCtx, a2a.NewTextPart("echo: "+text)), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, nil), nil)
	}
}

func (e *testExecutor) Cancel(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

// headerAuth is an a2asrv call interceptor that authenticates the user named
// in the X-User header, which shows that request headers reach the call
// context; a2a-go's in-memory task store lists only the caller's tasks. It
// also activates testExtension when a client requests it.
type headerAuth struct {
	a2asrv.PassthroughCallInterceptor
}

var testExtension = &a2a.AgentExtension{URI: "urn:test:extension"}

func (headerAuth) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if user, ok := callCtx.ServiceParams().Get("x-user"); ok {
		callCtx.User = a2asrv.NewAuthenticatedUser(user[0], nil)
	}
	if callCtx.Extensions().Requested(testExtension) {
		callCtx.Extensions().Activate(testExtension)
	}
	return ctx, nil, nil
}

// newTestHandler is a2asrv's default handler over executor with headerAuth.
func newTestHandler(executor a2asrv.AgentExecutor, opts ...a2asrv.RequestHandlerOption) a2asrv.RequestHandler {
	return a2asrv.NewHandler(executor, append(opts, a2asrv.WithCallInterceptors(headerAuth{}))...)
}

func (e *testExecutor) executorContext(t *testing.T, id a2a.TaskID) *a2asrv.ExecutorContext {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	execCtx, ok := e.seen[id]
	if !ok {
		t.Fatalf("executor never ran task %s", id)
	}
	return execCtx
}

// startServer serves NewHandler(h) on 127.0.0.1 over HTTP/1.1 and cleartext
// HTTP/2 (h2c), which gRPC clients need, and returns the base URL.
func startServer(t *testing.T, h a2asrv.RequestHandler) string {
	t.Helper()
	path, handler := a2aconnect.NewHandler(h)
	if path != "/lf.a2a.v1.A2AService/" {
		t.Fatalf("NewHandler() path = %q, want %q", path, "/lf.a2a.v1.A2AService/")
	}
	mux := http.NewServeMux()
	mux.Handle(path, handler)

	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// newGRPCClient returns a2a-go's own client over its gRPC transport, talking
// to the server at baseURL as tenant (may be empty).
func newGRPCClient(t *testing.T, baseURL, tenant string) *a2aclient.Client {
	t.Helper()
	iface := a2a.NewAgentInterface(strings.TrimPrefix(baseURL, "http://"), a2a.TransportProtocolGRPC)
	iface.Tenant = tenant
	client, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{iface},
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatalf("a2aclient.NewFromEndpoints() error = %v", err)
	}
	t.Cleanup(func() { _ = client.Destroy() })
	return client
}

// within fails the test if ch does not deliver within a generous bound; it
// only guards against hangs and never paces the test.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func userMessage(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

// artifactText joins the text of all artifact parts of task.
func artifactText(task *a2a.Task) string {
	var b strings.Builder
	for _, artifact := range task.Artifacts {
		for _, part := range artifact.Parts {
			b.WriteString(part.Text())
		}
	}
	return b.String()
}
