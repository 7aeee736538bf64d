package a2ahttp

import (
	"bytes"
	"context"
	"iter"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// benchEngine answers at once, so that BenchmarkJSONRPCRoute measures the
// route: a completed task, or a2a.ErrTaskNotFound for failing requests.
type benchEngine struct {
	a2asrv.RequestHandler
	fail bool
}

func (e benchEngine) answer() (*a2a.Task, error) {
	if e.fail {
		return nil, a2a.ErrTaskNotFound
	}
	return &a2a.Task{ID: "t-1", ContextID: "c-1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, nil
}

func (e benchEngine) GetTask(context.Context, *a2a.GetTaskRequest) (*a2a.Task, error) {
	return e.answer()
}

func (e benchEngine) SendMessage(context.Context, *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	t, err := e.answer()
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (e benchEngine) SendStreamingMessage(context.Context, *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(e.answer()) }
}

// BenchmarkJSONRPCRoute serves JSON-RPC 1.0 requests through streamJSONRPC
// over an engine that answers at once: answers the route writes itself, and
// errors it leaves to a2a-go to write.
func BenchmarkJSONRPCRoute(b *testing.B) {
	const msg = `"params":{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`
	cases := []struct {
		name string
		fail bool
		body string
	}{
		{"SendMessage", false, `{"jsonrpc":"2.0","id":1,"method":"SendMessage",` + msg},
		{"SendMessageError", true, `{"jsonrpc":"2.0","id":1,"method":"SendMessage",` + msg},
		{"SendStreamingMessage", false, `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage",` + msg},
		{"SendStreamingMessageError", true, `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage",` + msg},
		{"GetTask", false, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`},
		{"GetTaskError", true, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h := CallerHandler{next: benchEngine{fail: c.fail}}
			route := streamJSONRPC(h)
			data := []byte(c.body)
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/a2a/jsonrpc", nil)
				r.Body = &bufferedBody{Reader: bytes.NewReader(data), data: data}
				w := httptest.NewRecorder()
				route.ServeHTTP(w, r)
				if w.Code != 200 || w.Body.Len() == 0 {
					b.Fatalf("status %d, %q", w.Code, w.Body)
				}
			}
		})
	}
}
