package a2ahttp

import (
	"context"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// An Observer hears of every A2A request the face's bindings serve, once it
// has been answered (a stream: once it ended). It is called on the request's
// goroutine and must be cheap and safe for concurrent use.
type Observer interface {
	// Request reports one call of method ("SendMessage", ...) on binding
	// ("jsonrpc", "rest", "grpc"); err is the answer's error, nil when it
	// succeeded (for a stream: the error that ended it).
	Request(method, binding string, err error, d time.Duration)
}

// Observed returns the handler the face's routes of binding call: h, with
// each call reported to the face's Observer. Without one it is h.
func (f *Face) Observed(binding string) a2asrv.RequestHandler {
	if f.cfg.observer == nil {
		return f.h
	}
	return observed{next: f.h, binding: binding, obs: f.cfg.observer}
}

// observed reports each call of next to obs.
type observed struct {
	next    a2asrv.RequestHandler
	binding string
	obs     Observer
}

func (o observed) done(method string, start time.Time, err error) {
	o.obs.Request(method, o.binding, err, time.Since(start))
}

// observeStream reports a stream once it has ended: its last error, or nil.
func observeStream(o observed, method string, seq iter.Seq2[a2a.Event, error]) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		start := time.Now()
		var last error
		for ev, err := range seq {
			if err != nil {
				last = err
			}
			if !yield(ev, err) {
				break
			}
		}
		o.done(method, start, last)
	}
}

// GetTask implements [a2asrv.RequestHandler].
func (o observed) GetTask(ctx context.Context, r *a2a.GetTaskRequest) (*a2a.Task, error) {
	start := time.Now()
	t, err := o.next.GetTask(ctx, r)
	o.done("GetTask", start, err)
	return t, err
}

// ListTasks implements [a2asrv.RequestHandler].
func (o observed) ListTasks(ctx context.Context, r *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	start := time.Now()
	l, err := o.next.ListTasks(ctx, r)
	o.done("ListTasks", start, err)
	return l, err
}

// CancelTask implements [a2asrv.RequestHandler].
func (o observed) CancelTask(ctx context.Context, r *a2a.CancelTaskRequest) (*a2a.Task, error) {
	start := time.Now()
	t, err := o.next.CancelTask(ctx, r)
	o.done("CancelTask", start, err)
	return t, err
}

// SendMessage implements [a2asrv.RequestHandler].
func (o observed) SendMessage(ctx context.Context, r *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	start := time.Now()
	res, err := o.next.SendMessage(ctx, r)
	o.done("SendMessage", start, err)
	return res, err
}

// SubscribeToTask implements [a2asrv.RequestHandler].
func (o observed) SubscribeToTask(ctx context.Context, r *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return observeStream(o, "SubscribeToTask", o.next.SubscribeToTask(ctx, r))
}

// SendStreamingMessage implements [a2asrv.RequestHandler].
func (o observed) SendStreamingMessage(ctx context.Context, r *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return observeStream(o, "SendStreamingMessage", o.next.SendStreamingMessage(ctx, r))
}

// SendStreamingMessageWithFlush keeps next's flushing stream (the JSON-RPC
// fast path's) when it has one.
func (o observed) SendStreamingMessageWithFlush(ctx context.Context, r *a2a.SendMessageRequest, flush func()) iter.Seq2[a2a.Event, error] {
	fs, ok := o.next.(flushingStreamer)
	if !ok {
		return o.SendStreamingMessage(ctx, r)
	}
	return observeStream(o, "SendStreamingMessage", fs.SendStreamingMessageWithFlush(ctx, r, flush))
}

// GetTaskPushConfig implements [a2asrv.RequestHandler].
func (o observed) GetTaskPushConfig(ctx context.Context, r *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	start := time.Now()
	c, err := o.next.GetTaskPushConfig(ctx, r)
	o.done("GetTaskPushNotificationConfig", start, err)
	return c, err
}

// ListTaskPushConfigs implements [a2asrv.RequestHandler].
func (o observed) ListTaskPushConfigs(ctx context.Context, r *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	start := time.Now()
	l, err := o.next.ListTaskPushConfigs(ctx, r)
	o.done("ListTaskPushNotificationConfigs", start, err)
	return l, err
}

// CreateTaskPushConfig implements [a2asrv.RequestHandler].
func (o observed) CreateTaskPushConfig(ctx context.Context, r *a2a.PushConfig) (*a2a.PushConfig, error) {
	start := time.Now()
	c, err := o.next.CreateTaskPushConfig(ctx, r)
	o.done("CreateTaskPushNotificationConfig", start, err)
	return c, err
}

// DeleteTaskPushConfig implements [a2asrv.RequestHandler].
func (o observed) DeleteTaskPushConfig(ctx context.Context, r *a2a.DeleteTaskPushConfigRequest) error {
	start := time.Now()
	err := o.next.DeleteTaskPushConfig(ctx, r)
	o.done("DeleteTaskPushNotificationConfig", start, err)
	return err
}

// GetExtendedAgentCard implements [a2asrv.RequestHandler].
func (o observed) GetExtendedAgentCard(ctx context.Context, r *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	start := time.Now()
	c, err := o.next.GetExtendedAgentCard(ctx, r)
	o.done("GetExtendedAgentCard", start, err)
	return c, err
}
