package tck

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// testTimeout bounds every test's calls, so a script that ignores
// cancellation fails the test instead of hanging it.
const testTimeout = 20 * time.Second

// serve runs exec behind a2a-go's JSON-RPC handler on a loopback socket,
// with its agent card at the well-known path, and returns a client built the
// way a real peer would build one: from the card fetched over HTTP.
func serve(t *testing.T, exec *Executor) *a2aclient.Client {
	t.Helper()
	return serveStore(t, exec, newStore())
}

// newStore is a2a-go's in-memory task store. It lists only an authenticated
// user's tasks; one fixed user lets tests list what the agent created.
func newStore() taskstore.Store {
	return taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
		Authenticator: func(context.Context) (string, error) { return "tck-test", nil },
	})
}

// serveStore is serve with the task store given, so two servers can share
// one.
func serveStore(t *testing.T, exec *Executor, store taskstore.Store) *a2aclient.Client {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	card := &a2a.AgentCard{
		Name:        "Handoff TCK agent",
		Description: "Conformance agent steered by messageId prefixes.",
		Version:     "test",
		SupportedInterfaces: []*a2a.AgentInterface{{
			URL:             srv.URL,
			ProtocolBinding: a2a.TransportProtocolJSONRPC,
			ProtocolVersion: "1.0",
		}},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: "tck", Name: "TCK", Description: "Scripted conformance behaviour.", Tags: []string{"tck"},
		}},
	}
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec, a2asrv.WithTaskStore(store))))

	ctx := testContext(t)
	resolved, err := agentcard.NewResolver(srv.Client()).Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	client, err := a2aclient.NewFromCard(ctx, resolved)
	if err != nil {
		t.Fatalf("client from card: %v", err)
	}
	t.Cleanup(func() { _ = client.Destroy() })
	return client
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// send builds a request for a new task whose message id starts with prefix;
// the unique suffix mirrors the TCK, which never reuses an id.
func send(prefix string, parts ...*a2a.Part) *a2a.SendMessageRequest {
	if len(parts) == 0 {
		parts = []*a2a.Part{a2a.NewTextPart("hi")}
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, parts...)
	msg.ID = prefix + "-" + a2a.NewMessageID()
	return &a2a.SendMessageRequest{Message: msg}
}

// sendTask sends req blocking and fails unless the answer is a task.
func sendTask(ctx context.Context, t *testing.T, client *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := client.SendMessage(ctx, req)
	if err != nil {
		t.Fatalf("SendMessage(%s): %v", req.Message.ID, err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage(%s) = %T, want *a2a.Task", req.Message.ID, res)
	}
	return task
}

// statusTexts is the text of the task's status message, nil without one. It
// also checks the message is the agent's and belongs to the task.
func statusTexts(t *testing.T, task *a2a.Task) []string {
	t.Helper()
	msg := task.Status.Message
	if msg == nil {
		return nil
	}
	if msg.Role != a2a.MessageRoleAgent {
		t.Errorf("status message role = %q, want agent", msg.Role)
	}
	if msg.TaskID != task.ID || msg.ContextID != task.ContextID {
		t.Errorf("status message ids = (%q, %q), want task's (%q, %q)", msg.TaskID, msg.ContextID, task.ID, task.ContextID)
	}
	return texts(msg.Parts)
}

func texts(parts []*a2a.Part) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.Text())
	}
	return out
}

// artifactParts flattens each artifact to its parts, checking it has an id.
func artifactParts(t *testing.T, artifacts []*a2a.Artifact) [][]*a2a.Part {
	t.Helper()
	var out [][]*a2a.Part
	for _, a := range artifacts {
		if a.ID == "" {
			t.Error("artifact without id")
		}
		out = append(out, a.Parts)
	}
	return out
}

// show renders a value for failure messages; parts hold interfaces, which %v
// prints as pointers.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func textPart(s string) *a2a.Part { return a2a.NewTextPart(s) }

// wantFilePart and friends are what a client decodes, spelled out
// independently of the executor's helpers so that a change there shows.
func wantFilePart() *a2a.Part {
	return &a2a.Part{Content: a2a.Raw("Generated file content"), Filename: "output.txt", MediaType: "text/plain"}
}

func wantFileURLPart() *a2a.Part {
	return &a2a.Part{Content: a2a.URL("https://example.com/output.txt"), Filename: "output.txt", MediaType: "text/plain"}
}

func wantDataPart() *a2a.Part {
	// JSON numbers decode as float64.
	return &a2a.Part{Content: a2a.Data{Value: map[string]any{"key": "value", "count": float64(42)}}}
}

// TestBlockingSend checks the final task a blocking SendMessage returns for
// every scripted prefix (streaming ones too: a blocking client must get the
// same end state) and that the task store agrees.
func TestBlockingSend(t *testing.T) {
	client := serve(t, New())
	tests := []struct {
		prefix     string
		state      a2a.TaskState
		statusText []string
		artifacts  [][]*a2a.Part
	}{
		{prefix: "tck-complete-task", state: a2a.TaskStateCompleted, statusText: []string{"Hello from TCK"}},
		{prefix: "tck-artifact-text", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{textPart("Generated text content")}}},
		{prefix: "tck-artifact-file", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{wantFilePart()}}},
		{prefix: "tck-artifact-file-url", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{wantFileURLPart()}}},
		{prefix: "tck-artifact-data", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{wantDataPart()}}},
		{prefix: "tck-input-required", state: a2a.TaskStateInputRequired, statusText: []string{"Please provide input to continue"}},
		{prefix: "tck-reject-task", state: a2a.TaskStateRejected, statusText: []string{"rejected"}},
		{prefix: "tck-stream-001", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{textPart("Stream hello from TCK")}}},
		{prefix: "tck-stream-002", state: a2a.TaskStateCompleted},
		{prefix: "tck-stream-003", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{textPart("Stream task lifecycle")}}},
		{prefix: "tck-stream-ordering-001", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{textPart("Ordered output")}}},
		{prefix: "tck-stream-artifact-text", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{textPart("Streamed text content")}}},
		{prefix: "tck-stream-artifact-file", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{wantFilePart()}}},
		{prefix: "tck-stream-artifact-chunked", state: a2a.TaskStateCompleted, artifacts: [][]*a2a.Part{{textPart("chunk-1 "), textPart("chunk-2")}}},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			req := send(tt.prefix)
			task := sendTask(ctx, t, client, req)

			if task.ID == "" || task.ContextID == "" {
				t.Fatalf("task ids = (%q, %q), want both set", task.ID, task.ContextID)
			}
			if task.Status.State != tt.state {
				t.Errorf("state = %s, want %s", task.Status.State, tt.state)
			}
			if got := statusTexts(t, task); !reflect.DeepEqual(got, tt.statusText) {
				t.Errorf("status message = %q, want %q", got, tt.statusText)
			}
			if got := artifactParts(t, task.Artifacts); !reflect.DeepEqual(got, tt.artifacts) {
				t.Errorf("artifacts = %s, want %s", show(got), show(tt.artifacts))
			}
			if len(task.History) == 0 || task.History[0].ID != req.Message.ID {
				t.Errorf("history = %s, want the request message first", show(task.History))
			}

			stored, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatalf("GetTask: %v", err)
			}
			if stored.Status.State != tt.state || stored.ContextID != task.ContextID {
				t.Errorf("stored task = (%s, %q), want (%s, %q)", stored.Status.State, stored.ContextID, tt.state, task.ContextID)
			}
		})
	}
}

// TestEcho checks that an unscripted message completes with its text parts
// repeated in the status message, and that a message without text completes
// with none.
func TestEcho(t *testing.T) {
	client := serve(t, New())
	tests := []struct {
		name  string
		parts []*a2a.Part
		want  []string
	}{
		{
			name:  "text parts",
			parts: []*a2a.Part{textPart("hello"), a2a.NewDataPart(map[string]any{"skip": true}), textPart("world")},
			want:  []string{"hello", "world"},
		},
		{name: "no text", parts: []*a2a.Part{a2a.NewDataPart(map[string]any{"n": 1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			task := sendTask(ctx, t, client, send("plain-message", tt.parts...))
			if task.Status.State != a2a.TaskStateCompleted {
				t.Errorf("state = %s, want completed", task.Status.State)
			}
			if got := statusTexts(t, task); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("status message = %q, want %q", got, tt.want)
			}
			if len(task.Artifacts) != 0 {
				t.Errorf("artifacts = %s, want none", show(task.Artifacts))
			}
		})
	}
}

// TestMessageResponse checks tck-message-response answers with a bare agent
// message, blocking and streaming, and leaves no task behind.
func TestMessageResponse(t *testing.T) {
	client := serve(t, New())
	ctx := testContext(t)

	res, err := client.SendMessage(ctx, send("tck-message-response"))
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	msg, ok := res.(*a2a.Message)
	if !ok {
		t.Fatalf("SendMessage = %T, want *a2a.Message", res)
	}
	checkDirectMessage(t, msg)

	var events []a2a.Event
	for ev, err := range client.SendStreamingMessage(ctx, send("tck-message-response")) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		events = append(events, ev)
	}
	if len(events) != 1 {
		t.Fatalf("stream = %s, want one message", show(events))
	}
	msg, ok = events[0].(*a2a.Message)
	if !ok {
		t.Fatalf("stream event = %T, want *a2a.Message", events[0])
	}
	checkDirectMessage(t, msg)

	list, err := client.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatalf("ListTasks: %v", err)
	}
	if len(list.Tasks) != 0 {
		t.Errorf("tasks = %s, want none", show(list.Tasks))
	}
}

func checkDirectMessage(t *testing.T, msg *a2a.Message) {
	t.Helper()
	if msg.Role != a2a.MessageRoleAgent {
		t.Errorf("role = %q, want agent", msg.Role)
	}
	if got := texts(msg.Parts); !reflect.DeepEqual(got, []string{"Direct message response"}) {
		t.Errorf("text = %q, want Direct message response", got)
	}
	if msg.TaskID != "" || msg.ContextID == "" {
		t.Errorf("ids = (%q, %q), want no task and a context", msg.TaskID, msg.ContextID)
	}
}

// TestInputRequiredThenContinue checks the two turns of tck-input-required:
// the task waits for input, and the next message on it completes it with an
// echo of that message, whatever its id.
func TestInputRequiredThenContinue(t *testing.T) {
	client := serve(t, New())
	ctx := testContext(t)

	first := send("tck-input-required")
	task := sendTask(ctx, t, client, first)
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("state = %s, want input-required", task.Status.State)
	}

	// The id deliberately matches a script: on an existing task it must not
	// matter.
	reply := send("tck-reject-task", textPart("here is more"))
	reply.Message.TaskID, reply.Message.ContextID = task.ID, task.ContextID
	done := sendTask(ctx, t, client, reply)

	if done.ID != task.ID || done.ContextID != task.ContextID {
		t.Errorf("ids = (%q, %q), want (%q, %q)", done.ID, done.ContextID, task.ID, task.ContextID)
	}
	if done.Status.State != a2a.TaskStateCompleted {
		t.Errorf("state = %s, want completed", done.Status.State)
	}
	if got := statusTexts(t, done); !reflect.DeepEqual(got, []string{"here is more"}) {
		t.Errorf("status message = %q, want the reply echoed", got)
	}
	var userIDs []string
	for _, m := range done.History {
		if m.Role == a2a.MessageRoleUser {
			userIDs = append(userIDs, m.ID)
		}
	}
	if want := []string{first.Message.ID, reply.Message.ID}; !reflect.DeepEqual(userIDs, want) {
		t.Errorf("user messages in history = %q, want %q", userIDs, want)
	}
}

// TestInputRequiredStaysForInputRequiredFollowUp sends a follow-up whose
// own id is a tck-input-required one, as the TCK's history checks do: the
// task asks for input again and keeps every message in its history; any
// other follow-up then completes it.
func TestInputRequiredStaysForInputRequiredFollowUp(t *testing.T) {
	client := serve(t, New())
	ctx := testContext(t)

	first := send("tck-input-required-first")
	task := sendTask(ctx, t, client, first)
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("state = %s, want input-required", task.Status.State)
	}

	again := send("tck-input-required-second", textPart("still thinking"))
	again.Message.TaskID, again.Message.ContextID = task.ID, task.ContextID
	still := sendTask(ctx, t, client, again)
	if still.ID != task.ID {
		t.Fatalf("follow-up answered task %q, want %q", still.ID, task.ID)
	}
	if still.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("after a tck-input-required follow-up: state = %s, want input-required", still.Status.State)
	}
	if got := statusTexts(t, still); !reflect.DeepEqual(got, []string{inputText}) {
		t.Errorf("status message = %q, want %q", got, inputText)
	}

	last := send("anything-else", textPart("done now"))
	last.Message.TaskID, last.Message.ContextID = task.ID, task.ContextID
	done := sendTask(ctx, t, client, last)
	if done.Status.State != a2a.TaskStateCompleted {
		t.Errorf("after a plain follow-up: state = %s, want completed", done.Status.State)
	}
	var userIDs []string
	for _, m := range done.History {
		if m.Role == a2a.MessageRoleUser {
			userIDs = append(userIDs, m.ID)
		}
	}
	if want := []string{first.Message.ID, again.Message.ID, last.Message.ID}; !reflect.DeepEqual(userIDs, want) {
		t.Errorf("user messages in history = %q, want %q", userIDs, want)
	}
}

// TestCancelInputRequired cancels a task no execution is running for, the
// TCK's CORE-CANCEL-001 setup. The cancel goes to a second server sharing the
// task store: a2a-go keeps a finished execution registered for a moment after
// the blocking call returns, and a cancel landing in that window is routed to
// the finished run and fails; a server that never ran the task has no such
// window, so the test exercises Cancel deterministically.
func TestCancelInputRequired(t *testing.T) {
	store := newStore()
	creator := serveStore(t, New(), store)
	canceler := serveStore(t, New(), store)
	ctx := testContext(t)

	task := sendTask(ctx, t, creator, send("tck-input-required"))
	canceled, err := canceler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask: %v", err)
	}
	if canceled.ID != task.ID || canceled.ContextID != task.ContextID || canceled.Status.State != a2a.TaskStateCanceled {
		t.Errorf("CancelTask = (%q, %q, %s), want (%q, %q, canceled)",
			canceled.ID, canceled.ContextID, canceled.Status.State, task.ID, task.ContextID)
	}
	stored, err := creator.GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	if stored.Status.State != a2a.TaskStateCanceled {
		t.Errorf("stored state = %s, want canceled", stored.Status.State)
	}
}

// TestResubscribeDelay runs the long-running script on the real timer with a
// short delay: it must complete, and not before the delay.
func TestResubscribeDelay(t *testing.T) {
	const delay = 50 * time.Millisecond
	client := serve(t, New(WithResubscribeDelay(delay)))
	ctx := testContext(t)

	start := time.Now()
	task := sendTask(ctx, t, client, send("test-resubscribe-message-id"))
	if elapsed := time.Since(start); elapsed < delay {
		t.Errorf("completed after %v, want at least %v", elapsed, delay)
	}
	if task.Status.State != a2a.TaskStateCompleted {
		t.Errorf("state = %s, want completed", task.Status.State)
	}
}
