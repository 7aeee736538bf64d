package tasks_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// scriptExec behaves by the first word of the message text.
type scriptExec struct {
	release chan struct{} // "wait" blocks on it
}

func textOf(m *a2a.Message) string {
	if m == nil || len(m.Parts) == 0 {
		return ""
	}
	return m.Parts[0].Text()
}

func (x *scriptExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := textOf(ec.Message)
		switch {
		case text == "refuse":
			yield(nil, a2a.NewError(a2a.ErrInvalidParams, "refused"))
			return
		case text == "message":
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("direct")), nil)
			return
		case text == "panic":
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			panic("boom")
		case text == "bad":
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			yield(a2a.NewArtifactUpdateEvent(ec, "nope", a2a.NewTextPart("x")), nil)
			return
		case text == "hang":
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			<-ctx.Done()
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		switch text {
		case "ask":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("more?"))), nil)
			return
		case "wait":
			select {
			case <-x.release:
			case <-ctx.Done():
				return
			}
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("echo: "+text)), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (x *scriptExec) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func newEngine(t testing.TB, dir string, opts ...tasks.Option) (*tasks.Engine, *scriptExec, *boltstore.Store) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := &scriptExec{release: make(chan struct{})}
	e, err := tasks.NewEngine(context.Background(), st, x, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		e.Shutdown(ctx)
		st.Close()
	})
	return e, x, st
}

func send(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

func TestBlockingSend(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir())
	res, err := e.SendMessage(t.Context(), send("hi"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Text() != "echo: hi" {
		t.Fatalf("task = %+v", task)
	}
	got, err := e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("GetTask = %v, %v", got, err)
	}
	zero := 0
	got, _ = e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID, HistoryLength: &zero})
	if len(got.History) != 0 {
		t.Fatalf("history with historyLength 0: %d", len(got.History))
	}
}

func collect(t *testing.T, seq iter.Seq2[a2a.Event, error]) ([]a2a.Event, error) {
	t.Helper()
	var out []a2a.Event
	for ev, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

func kinds(evs []a2a.Event) string {
	var b []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *a2a.Task:
			b = append(b, "task:"+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			b = append(b, "status:"+string(e.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			b = append(b, "artifact")
		case *a2a.Message:
			b = append(b, "message")
		}
	}
	return strings.Join(b, ",")
}

func TestStreamAndSubscribers(t *testing.T) {
	e, x, _ := newEngine(t, t.TempDir())
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	var wg sync.WaitGroup
	results := make([]string, 2)
	ready := make(chan struct{}, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []a2a.Event
			for ev, err := range e.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: id}) {
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					ready <- struct{}{}
				}
				got = append(got, ev)
			}
			results[i] = kinds(got)
		}()
	}
	<-ready
	<-ready
	close(x.release)
	wg.Wait()
	for i, r := range results {
		if r != "task:TASK_STATE_SUBMITTED,status:TASK_STATE_WORKING,artifact,status:TASK_STATE_COMPLETED" &&
			r != "task:TASK_STATE_WORKING,artifact,status:TASK_STATE_COMPLETED" {
			t.Errorf("subscriber %d saw %s", i, r)
		}
	}
	_, err = collect(t, e.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: id}))
	if !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("subscribe to finished task: %v", err)
	}
}

func TestStreamNewTask(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir())
	evs, err := collect(t, e.SendStreamingMessage(t.Context(), send("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(evs); got != "task:TASK_STATE_SUBMITTED,status:TASK_STATE_WORKING,artifact,status:TASK_STATE_COMPLETED" {
		t.Fatalf("stream = %s", got)
	}
}

func TestInputRequiredContinuation(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir())
	res, err := e.SendMessage(t.Context(), send("ask"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("state %s", task.Status.State)
	}
	next := send("answer")
	next.Message.TaskID = task.ID
	evs, err := collect(t, e.SendStreamingMessage(t.Context(), next))
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(evs); got != "task:TASK_STATE_WORKING,status:TASK_STATE_WORKING,artifact,status:TASK_STATE_COMPLETED" {
		t.Fatalf("continuation stream = %s", got)
	}
	final, _ := e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	if n := len(final.History); n != 3 {
		t.Fatalf("history has %d messages, want 3 (ask, question, answer)", n)
	}
	again := send("more")
	again.Message.TaskID = task.ID
	if _, err := e.SendMessage(t.Context(), again); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("message to completed task: %v", err)
	}
}

func TestFailures(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir(), tasks.WithIdleTimeout(200*time.Millisecond))
	if _, err := e.SendMessage(t.Context(), send("refuse")); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("refuse: %v", err)
	}
	res, err := e.SendMessage(t.Context(), send("message"))
	if m, ok := res.(*a2a.Message); err != nil || !ok || textOf(m) != "direct" {
		t.Fatalf("message: %v %v", res, err)
	}
	for _, text := range []string{"panic", "bad", "hang"} {
		res, err := e.SendMessage(t.Context(), send(text))
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		task := res.(*a2a.Task)
		if task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil {
			t.Fatalf("%s: state %s", text, task.Status.State)
		}
		t.Logf("%s: %s", text, textOf(task.Status.Message))
	}
	if _, err := e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "nope"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
}

func TestCancel(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir())
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	task, err := e.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", task, err)
	}
	if _, err := e.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("second cancel: %v", err)
	}
}

func TestRestartFailsRunningTasks(t *testing.T) {
	dir := t.TempDir()
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	x := &scriptExec{release: make(chan struct{})}
	e, err := tasks.NewEngine(t.Context(), st, x)
	if err != nil {
		t.Fatal(err)
	}
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	st.Close() // the process "dies": nothing more is written
	close(x.release)

	e2, _, _ := newEngine(t, dir)
	got, err := e2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateFailed || !strings.Contains(textOf(got.Status.Message), "restarted") {
		t.Fatalf("after restart: %s %q", got.Status.State, textOf(got.Status.Message))
	}
}

func TestListTasks(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir())
	var ids []a2a.TaskID
	for range 5 {
		res, err := e.SendMessage(t.Context(), send("hi"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.(*a2a.Task).ID)
	}
	var seen []a2a.TaskID
	token := ""
	for {
		page, err := e.ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if page.TotalSize != 5 {
			t.Fatalf("total %d", page.TotalSize)
		}
		for _, tk := range page.Tasks {
			seen = append(seen, tk.ID)
		}
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d tasks", len(seen))
	}
	for i := range seen { // newest first
		if seen[i] != ids[len(ids)-1-i] {
			t.Fatalf("order: %v vs %v", seen, ids)
		}
	}
	if _, err := e.ListTasks(t.Context(), &a2a.ListTasksRequest{PageToken: "!!"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("bad token: %v", err)
	}
}

func TestCapabilityChecks(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir(), tasks.WithCapabilities(a2a.AgentCapabilities{}))
	if _, err := collect(t, e.SendStreamingMessage(t.Context(), send("hi"))); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("stream without streaming: %v", err)
	}
	if _, err := collect(t, e.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: "x"})); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("subscribe without streaming: %v", err)
	}
	if _, err := e.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: "x", URL: "https://example.com"}); !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Fatalf("push without capability: %v", err)
	}
	if _, err := e.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{}); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("extended card without capability: %v", err)
	}
}

func TestExtendedCard(t *testing.T) {
	card := &a2a.AgentCard{Name: "extended"}
	e, _, _ := newEngine(t, t.TempDir(), tasks.WithCapabilities(a2a.AgentCapabilities{ExtendedAgentCard: true}),
		tasks.WithExtendedCard(func(context.Context) (*a2a.AgentCard, error) { return card, nil }))
	got, err := e.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{})
	if err != nil || got.Name != "extended" {
		t.Fatalf("extended card: %v %v", got, err)
	}
}

func TestPushConfigs(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir(), tasks.WithCapabilities(a2a.AgentCapabilities{PushNotifications: true}),
		tasks.WithPushURLCheck(func(_ context.Context, u string) error {
			if strings.Contains(u, "evil") {
				return errors.New("evil host")
			}
			return nil
		}))
	req := send("hi")
	req.Config = &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "https://hooks.example/1", Token: "a-long-secret-token"}}
	res, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	if _, err := e.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: id, ID: "b", URL: "https://hooks.example/2"}); err != nil {
		t.Fatal(err)
	}
	list, err := e.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: id})
	if err != nil || len(list.Configs) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	for _, c := range list.Configs {
		if c.Token != "" && c.Token != "****oken" {
			t.Fatalf("token returned as %q, want it masked", c.Token)
		}
	}
	if _, err := e.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: id, URL: "https://evil.example/"}); !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "evil host") {
		t.Fatalf("refused target: %v", err)
	}
	// Paged: one config a page, in id order, the token leading to the next.
	var paged []string
	token := ""
	for {
		page, err := e.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: id, PageSize: 1, PageToken: token})
		if err != nil || len(page.Configs) != 1 {
			t.Fatalf("page: %+v %v", page, err)
		}
		paged = append(paged, page.Configs[0].ID)
		if token = page.NextPageToken; token == "" {
			break
		}
	}
	if len(paged) != 2 || paged[0] >= paged[1] {
		t.Fatalf("pages: %v", paged)
	}
	if _, err := e.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: id, PageToken: "!"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("bad token: %v", err)
	}
	got, err := e.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: id, ID: "b"})
	if err != nil || got.URL != "https://hooks.example/2" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if err := e.DeleteTaskPushConfig(t.Context(), &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: id, ID: "b"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := e.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: "nope", URL: "https://x"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("config for unknown task: %v", err)
	}
	if _, err := e.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: id}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("config without url: %v", err)
	}
}

// TestConcurrencyBound: with one slot, a second message waits until the
// first task finishes, and gives up when its context ends.
func TestConcurrencyBound(t *testing.T) {
	e, x, _ := newEngine(t, t.TempDir(), tasks.WithMaxConcurrent(1))
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	if _, err := e.SendMessage(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.SendMessage(short, send("hi")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second message with no slot: %v", err)
	}
	close(x.release)
	res, err := e.SendMessage(t.Context(), send("hi"))
	if err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after the slot freed: %v %v", res, err)
	}
}

// TestOwnersAreIsolated: another caller's task reads exactly as a missing one.
func TestOwnersAreIsolated(t *testing.T) {
	e, _, _ := newEngine(t, t.TempDir())
	alice := asUser(t.Context(), "alice")
	res, err := e.SendMessage(alice, send("hi"))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	bob := asUser(t.Context(), "bob")
	if _, err := e.GetTask(bob, &a2a.GetTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob reads alice's task: %v", err)
	}
	if _, err := e.CancelTask(bob, &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob cancels alice's task: %v", err)
	}
	if page, _ := e.ListTasks(bob, &a2a.ListTasksRequest{}); len(page.Tasks) != 0 {
		t.Fatalf("bob lists %d tasks", len(page.Tasks))
	}
	cont := send("more")
	cont.Message.TaskID = id
	if _, err := e.SendMessage(bob, cont); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob continues alice's task: %v", err)
	}
	if _, err := collect(t, e.SubscribeToTask(bob, &a2a.SubscribeToTaskRequest{ID: id})); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob subscribes to alice's task: %v", err)
	}
	if _, err := e.GetTask(alice, &a2a.GetTaskRequest{ID: id}); err != nil {
		t.Fatalf("alice reads her task: %v", err)
	}
}

func asUser(ctx context.Context, name string) context.Context {
	ctx, cc := a2asrv.NewCallContext(ctx, nil)
	cc.User = a2asrv.NewAuthenticatedUser(name, nil)
	return ctx
}

// approvingExec is scriptExec whose tasks take approvals: a data part
// {"approval": ...} of a message is its decision.
type approvingExec struct{ *scriptExec }

func (approvingExec) Approval(_ context.Context, ec *a2asrv.ExecutorContext) *a2a.Message {
	for _, p := range ec.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok && d["approval"] != nil {
			return a2a.NewMessageForTask(a2a.MessageRoleUser, ec, a2a.NewDataPart(map[string]any{"approval": d["approval"]}))
		}
	}
	return nil
}

// TestApproverMayAnswerAnothersTask: an approver continues another owner's
// task waiting for input with an approval, and with nothing else; the task
// stays its owner's, its history gains the decision alone, and nothing else
// of it is visible to the approver, blocking or streaming.
func TestApproverMayAnswerAnothersTask(t *testing.T) {
	_, e := openEngine(t, t.TempDir(), approvingExec{&scriptExec{release: make(chan struct{})}},
		tasks.WithApprovers(func(principal string) bool { return principal == "ops" }))
	alice, ops, bob := asUser(t.Context(), "alice"), asUser(t.Context(), "ops"), asUser(t.Context(), "bob")
	ask := func() a2a.TaskID {
		res, err := e.SendMessage(alice, send("ask"))
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2a.Task).ID
	}
	id := ask()
	message := func(id a2a.TaskID, parts ...*a2a.Part) *a2a.SendMessageRequest {
		m := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, parts...)}
		m.Message.TaskID = id
		return m
	}
	approval := a2a.NewDataPart(map[string]any{"approval": map[string]any{"ok": true}})
	remark := a2a.NewTextPart("remark of the approver")
	if _, err := e.SendMessage(bob, message(id, approval)); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("a non-approver answers: %v", err)
	}
	if _, err := e.GetTask(ops, &a2a.GetTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("the approver reads the task: %v", err)
	}
	if _, err := e.SendMessage(ops, message(id, remark)); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("the approver sends something else than an approval: %v", err)
	}
	res, err := e.SendMessage(ops, message(id, remark, approval))
	if err != nil {
		t.Fatalf("the approver answers: %v", err)
	}
	if got := res.(*a2a.Task); got.ID != id || got.Status.State != a2a.TaskStateCompleted || got.History != nil || got.Artifacts != nil || got.Metadata != nil {
		t.Fatalf("the approver got %+v, want the id and status only", got)
	}
	got, err := e.GetTask(alice, &a2a.GetTaskRequest{ID: id})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("alice's task after the answer: %v %v", got, err)
	}
	last := got.History[len(got.History)-1]
	if len(last.Parts) != 1 || last.Parts[0].Data() == nil || last.Parts[0].Text() != "" {
		t.Fatalf("alice's history ends with %+v, want the approval's decision alone", last)
	}
	if _, err := e.SendMessage(ops, message(id, approval)); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("the approver continues a finished task: %v", err)
	}

	// By stream: the outcome, one event, and none of the task's own.
	id = ask()
	evs, err := collect(t, e.SendStreamingMessage(ops, message(id, approval)))
	if err != nil || len(evs) != 1 {
		t.Fatalf("the approver's stream: %v %v, want one event", evs, err)
	}
	if tk, ok := evs[0].(*a2a.Task); !ok || tk.ID != id || tk.Status.State != a2a.TaskStateCompleted || tk.History != nil || tk.Artifacts != nil {
		t.Fatalf("the approver's stream: %#v", evs[0])
	}
}
