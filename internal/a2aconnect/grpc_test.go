package a2aconnect_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
)

// eventStream moves the events of a streaming call to a channel, so a test
// can read them one by one while acting on the task in between.
type eventStream struct {
	events chan a2a.Event
	err    error // set before events is closed
}

func startStream(ctx context.Context, seq iter.Seq2[a2a.Event, error]) *eventStream {
	s := &eventStream{events: make(chan a2a.Event)}
	go func() {
		defer close(s.events)
		for event, err := range seq {
			if err != nil {
				s.err = err
				return
			}
			select {
			case s.events <- event:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// next returns the next event, failing the test if the stream ended.
func (s *eventStream) next(t *testing.T) a2a.Event {
	t.Helper()
	select {
	case event, ok := <-s.events:
		if !ok {
			t.Fatalf("stream ended early, error = %v", s.err)
		}
		return event
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a stream event")
		return nil
	}
}

// rest returns the remaining events and the error that ended the stream.
func (s *eventStream) rest(t *testing.T) ([]a2a.Event, error) {
	t.Helper()
	var events []a2a.Event
	for {
		select {
		case event, ok := <-s.events:
			if !ok {
				return events, s.err
			}
			events = append(events, event)
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for the stream to end")
		}
	}
}

func wantStatus(t *testing.T, event a2a.Event, want a2a.TaskState) {
	t.Helper()
	update, ok := event.(*a2a.TaskStatusUpdateEvent)
	if !ok {
		t.Fatalf("event = %T, want *a2a.TaskStatusUpdateEvent(%s)", event, want)
	}
	if update.Status.State != want {
		t.Fatalf("status update state = %s, want %s", update.Status.State, want)
	}
}

func wantTask(t *testing.T, event a2a.Event, want a2a.TaskState) *a2a.Task {
	t.Helper()
	task, ok := event.(*a2a.Task)
	if !ok {
		t.Fatalf("event = %T, want *a2a.Task(%s)", event, want)
	}
	if task.Status.State != want {
		t.Fatalf("task state = %s, want %s", task.Status.State, want)
	}
	return task
}

func TestGRPCClient(t *testing.T) {
	executor := &testExecutor{}
	card := &a2a.AgentCard{
		Name:                "extended test agent",
		Description:         "echoes messages",
		Version:             "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface("127.0.0.1:1", a2a.TransportProtocolGRPC)},
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain"},
		Skills:              []a2a.AgentSkill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"echo"}}},
	}
	baseURL := startServer(t, newTestHandler(executor,
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(nil)),
		a2asrv.WithExtendedAgentCard(card)))
	client := newGRPCClient(t, baseURL, "")
	ctx := a2aclient.AttachServiceParams(t.Context(), a2aclient.ServiceParams{"X-User": {"alice"}})

	res, err := client.SendMessage(ctx, userMessage("hello"))
	if err != nil {
		t.Fatalf("SendMessage() error = %v", err)
	}
	echoed := wantTask(t, res, a2a.TaskStateCompleted)
	if got := artifactText(echoed); got != "echo: hello" {
		t.Fatalf("SendMessage() artifact = %q, want %q", got, "echo: hello")
	}

	t.Run("SendStreamingMessage", func(t *testing.T) {
		events, err := startStream(ctx, client.SendStreamingMessage(ctx, userMessage("streamed"))).rest(t)
		if err != nil {
			t.Fatalf("SendStreamingMessage() error = %v", err)
		}
		if len(events) != 4 {
			t.Fatalf("SendStreamingMessage() got %d events, want 4: %v", len(events), events)
		}
		task := wantTask(t, events[0], a2a.TaskStateSubmitted)
		wantStatus(t, events[1], a2a.TaskStateWorking)
		artifact, ok := events[2].(*a2a.TaskArtifactUpdateEvent)
		if !ok || artifact.Artifact.Parts[0].Text() != "echo: streamed" {
			t.Fatalf("events[2] = %#v, want artifact update %q", events[2], "echo: streamed")
		}
		wantStatus(t, events[3], a2a.TaskStateCompleted)
		for i, event := range events {
			if event.TaskInfo().TaskID != task.ID {
				t.Fatalf("events[%d] task = %s, want %s", i, event.TaskInfo().TaskID, task.ID)
			}
		}
	})

	t.Run("GetTask", func(t *testing.T) {
		task, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: echoed.ID})
		if err != nil {
			t.Fatalf("GetTask() error = %v", err)
		}
		if task.ID != echoed.ID || task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello" {
			t.Fatalf("GetTask() = %s %s %q, want %s completed %q",
				task.ID, task.Status.State, artifactText(task), echoed.ID, "echo: hello")
		}
	})

	t.Run("ListTasks", func(t *testing.T) {
		list, err := client.ListTasks(ctx, &a2a.ListTasksRequest{ContextID: echoed.ContextID})
		if err != nil {
			t.Fatalf("ListTasks() error = %v", err)
		}
		if len(list.Tasks) != 1 || list.Tasks[0].ID != echoed.ID {
			t.Fatalf("ListTasks(context %s) = %v, want only task %s", echoed.ContextID, list.Tasks, echoed.ID)
		}
		_, err = client.ListTasks(t.Context(), &a2a.ListTasksRequest{})
		if !errors.Is(err, a2a.ErrUnauthenticated) {
			t.Fatalf("ListTasks(anonymous) error = %v, want %v", err, a2a.ErrUnauthenticated)
		}
	})

	t.Run("CancelAndSubscribe", func(t *testing.T) {
		sent := startStream(ctx, client.SendStreamingMessage(ctx, userMessage(waitText)))
		task := wantTask(t, sent.next(t), a2a.TaskStateSubmitted)
		wantStatus(t, sent.next(t), a2a.TaskStateWorking)

		subscribed := startStream(ctx, client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: task.ID}))
		// The snapshot shows the subscription is in place before the cancel.
		if snapshot := wantTask(t, subscribed.next(t), a2a.TaskStateWorking); snapshot.ID != task.ID {
			t.Fatalf("SubscribeToTask() snapshot task = %s, want %s", snapshot.ID, task.ID)
		}

		canceled, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("CancelTask() error = %v", err)
		}
		if canceled.ID != task.ID || canceled.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("CancelTask() = %s %s, want %s canceled", canceled.ID, canceled.Status.State, task.ID)
		}

		for name, stream := range map[string]*eventStream{"SendStreamingMessage": sent, "SubscribeToTask": subscribed} {
			events, err := stream.rest(t)
			if err != nil {
				t.Fatalf("%s() error = %v", name, err)
			}
			if len(events) != 1 {
				t.Fatalf("%s() events after cancel = %v, want one canceled update", name, events)
			}
			wantStatus(t, events[0], a2a.TaskStateCanceled)
		}

		_, err = client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: echoed.ID})
		if !errors.Is(err, a2a.ErrTaskNotCancelable) {
			t.Fatalf("CancelTask(completed) error = %v, want %v", err, a2a.ErrTaskNotCancelable)
		}
	})

	t.Run("PushConfigs", func(t *testing.T) {
		created, err := client.CreateTaskPushConfig(ctx, &a2a.PushConfig{
			TaskID: echoed.ID, ID: "hook-1", URL: "https://example.invalid/hook", Token: "secret-token",
		})
		if err != nil {
			t.Fatalf("CreateTaskPushConfig() error = %v", err)
		}
		if created.TaskID != echoed.ID || created.ID != "hook-1" || created.URL != "https://example.invalid/hook" {
			t.Fatalf("CreateTaskPushConfig() = %+v", created)
		}

		got, err := client.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: echoed.ID, ID: "hook-1"})
		if err != nil {
			t.Fatalf("GetTaskPushConfig() error = %v", err)
		}
		if got.Token != "secret-token" || got.URL != created.URL {
			t.Fatalf("GetTaskPushConfig() = %+v, want %+v", got, created)
		}

		list, err := client.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: echoed.ID})
		if err != nil {
			t.Fatalf("ListTaskPushConfigs() error = %v", err)
		}
		if len(list) != 1 || list[0].ID != "hook-1" {
			t.Fatalf("ListTaskPushConfigs() = %v, want [hook-1]", list)
		}

		if err := client.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: echoed.ID, ID: "hook-1"}); err != nil {
			t.Fatalf("DeleteTaskPushConfig() error = %v", err)
		}
		list, err = client.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: echoed.ID})
		if err != nil || len(list) != 0 {
			t.Fatalf("ListTaskPushConfigs() after delete = %v, %v, want none", list, err)
		}
	})

	t.Run("GetExtendedAgentCard", func(t *testing.T) {
		got, err := client.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
		if err != nil {
			t.Fatalf("GetExtendedAgentCard() error = %v", err)
		}
		if got.Name != card.Name || got.Skills[0].ID != "echo" {
			t.Fatalf("GetExtendedAgentCard() = %+v, want %+v", got, card)
		}
	})

	t.Run("UnknownTask", func(t *testing.T) {
		_, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"})
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("GetTask(unknown) error = %v, want %v", err, a2a.ErrTaskNotFound)
		}
		_, err = startStream(ctx, client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: "no-such-task"})).rest(t)
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("SubscribeToTask(unknown) error = %v, want %v", err, a2a.ErrTaskNotFound)
		}
	})

	t.Run("EmptyTaskID", func(t *testing.T) {
		_, err := client.CancelTask(ctx, &a2a.CancelTaskRequest{})
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("CancelTask(empty id) error = %v, want %v", err, a2a.ErrInvalidParams)
		}
	})
}

// TestGRPCClientCallContext checks that request headers and the tenant reach
// the agent the way a2a-go's gRPC server passes them.
func TestGRPCClientCallContext(t *testing.T) {
	executor := &testExecutor{}
	client := newGRPCClient(t, startServer(t, newTestHandler(executor)), "acme")
	ctx := a2aclient.AttachServiceParams(t.Context(), a2aclient.ServiceParams{"X-Request-Tag": {"tag-42"}})

	res, err := client.SendMessage(ctx, userMessage("hello"))
	if err != nil {
		t.Fatalf("SendMessage() error = %v", err)
	}
	execCtx := executor.executorContext(t, wantTask(t, res, a2a.TaskStateCompleted).ID)
	if execCtx.Tenant != "acme" {
		t.Fatalf("executor tenant = %q, want %q", execCtx.Tenant, "acme")
	}
	if got, _ := execCtx.ServiceParams.Get("x-request-tag"); len(got) != 1 || got[0] != "tag-42" {
		t.Fatalf("executor service param x-request-tag = %v, want [tag-42]", got)
	}
}

// TestGRPCClientUnsupported checks that FailedPrecondition errors, which
// share one code, come back as the right sentinel.
func TestGRPCClientUnsupported(t *testing.T) {
	client := newGRPCClient(t, startServer(t, newTestHandler(&testExecutor{})), "")
	ctx := t.Context()

	_, err := client.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: "t", URL: "https://example.invalid/hook"})
	if !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Fatalf("CreateTaskPushConfig() error = %v, want %v", err, a2a.ErrPushNotificationNotSupported)
	}
	_, err = client.GetExtendedAgentCard(ctx, &a2a.GetExtendedAgentCardRequest{})
	if !errors.Is(err, a2a.ErrExtendedCardNotConfigured) {
		t.Fatalf("GetExtendedAgentCard() error = %v, want %v", err, a2a.ErrExtendedCardNotConfigured)
	}
}
