package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// testAgent answers "direct" with a plain message, "wait" by working until the task is
// canceled, and anything else by echoing it as an artifact and completing.
type testAgent struct {
	// stop releases "wait" executions when the test ends, so no execution outlives its server.
	stop <-chan struct{}
}

func (a testAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := ec.Message.Parts[0].Text()
		if text == "direct" {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("direct answer")), nil)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		if text == "wait" {
			select {
			case <-ctx.Done():
			case <-a.stop:
			}
			return
		}
		artifact := a2a.NewArtifactEvent(ec, a2a.NewTextPart("echo: "+text))
		artifact.Artifact.Name = "echo"
		artifact.LastChunk = true
		if !yield(artifact, nil) {
			return
		}
		done := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, done), nil)
	}
}

func (testAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// authenticateAs marks every call as made by one authenticated user: a2a-go's in-memory
// task store lists tasks only for an authenticated user.
type authenticateAs struct {
	a2asrv.PassthroughCallInterceptor
	name string
}

func (i authenticateAs) Before(ctx context.Context, callCtx *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	callCtx.User = a2asrv.NewAuthenticatedUser(i.name, nil)
	return ctx, nil, nil
}

// startAgent serves testAgent over JSON-RPC on a real socket and returns its base URL.
// Without authentication every call is anonymous.
func startAgent(t *testing.T, authenticate bool) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	stop := make(chan struct{})
	// Cleanups run last-in first-out: release waiting executions, then close the server.
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })

	opts := []a2asrv.RequestHandlerOption{a2asrv.WithLogger(slog.New(slog.DiscardHandler))}
	if authenticate {
		opts = append(opts, a2asrv.WithCallInterceptors(authenticateAs{name: "tester"}))
	}
	card := &a2a.AgentCard{
		Name:         "test agent",
		Description:  "echoes messages",
		Version:      "1",
		Capabilities: a2a.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*a2a.AgentInterface{{
			URL:             srv.URL,
			ProtocolBinding: a2a.TransportProtocolJSONRPC,
			ProtocolVersion: "1.0",
		}},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
	}
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(testAgent{stop: stop}, opts...)))
	return srv.URL
}

// runCLI runs one command line and returns what it wrote.
func runCLI(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustRun runs a command line that has to succeed and returns its stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCLI(t.Context(), args...)
	if err != nil {
		t.Fatalf("handoff %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// decodeLines parses --json output that lists records: one T a line.
func decodeLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var list []T
	for line := range strings.Lines(out) {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not one %T: %v", line, v, err)
		}
		list = append(list, v)
	}
	return list
}

// decodeEvents parses --json output of send: one A2A stream response a line.
func decodeEvents(t *testing.T, out string) []a2a.Event {
	t.Helper()
	var events []a2a.Event
	for line := range strings.Lines(out) {
		var sr a2a.StreamResponse
		if err := json.Unmarshal([]byte(line), &sr); err != nil {
			t.Fatalf("line %q is not an A2A stream response: %v", line, err)
		}
		events = append(events, sr.Event)
	}
	return events
}

// sendTask sends text with --json and returns the task the agent answers with.
func sendTask(t *testing.T, url, text string, flags ...string) *a2a.Task {
	t.Helper()
	events := decodeEvents(t, mustRun(t, append([]string{"send", url, text, "--json"}, flags...)...))
	if len(events) != 1 {
		t.Fatalf("send --json printed %d objects, want 1", len(events))
	}
	task, ok := events[0].(*a2a.Task)
	if !ok {
		t.Fatalf("send answered %T, want *a2a.Task", events[0])
	}
	return task
}

// artifactText is the text of the task's only artifact.
func artifactText(t *testing.T, task *a2a.Task) string {
	t.Helper()
	if len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("task has artifacts %+v, want one with one part", task.Artifacts)
	}
	return task.Artifacts[0].Parts[0].Text()
}

// assertInOrder fails unless each of want occurs in out, each after the previous one.
func assertInOrder(t *testing.T, out string, want ...string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("output lacks %q after the previous expected text; output:\n%s", w, out)
		}
		rest = rest[i+len(w):]
	}
}

func TestSendJSON(t *testing.T) {
	url := startAgent(t, true)
	task := sendTask(t, url, "hello")
	if task.Status.State != a2a.TaskStateCompleted {
		t.Errorf("state = %s, want completed", task.Status.State)
	}
	if got := artifactText(t, task); got != "echo: hello" {
		t.Errorf("artifact text = %q, want %q", got, "echo: hello")
	}
}

func TestSendPrintsTask(t *testing.T) {
	url := startAgent(t, true)
	out := mustRun(t, "send", url, "hello")
	assertInOrder(t, out, "task: ", "state: completed\n", "status: done\n", "artifact echo: echo: hello\n")
}

func TestSendDirectMessage(t *testing.T) {
	url := startAgent(t, true)
	if out := mustRun(t, "send", url, "direct"); out != "message agent: direct answer\n" {
		t.Errorf("output = %q, want the agent's message", out)
	}
	events := decodeEvents(t, mustRun(t, "send", url, "direct", "--json"))
	msg, ok := events[0].(*a2a.Message)
	if len(events) != 1 || !ok || msg.Parts[0].Text() != "direct answer" {
		t.Errorf("send --json printed %#v, want the one agent message", events)
	}
}

func TestSendContinuesContext(t *testing.T) {
	url := startAgent(t, true)
	first := sendTask(t, url, "one")
	second := sendTask(t, url, "two", "--context-id", first.ContextID)
	if second.ContextID != first.ContextID || second.ID == first.ID {
		t.Errorf("second task %s in context %s, want a new task in context %s", second.ID, second.ContextID, first.ContextID)
	}
}

func TestSendStream(t *testing.T) {
	url := startAgent(t, true)
	out := mustRun(t, "send", url, "hello", "--stream")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{"task ", "state working", "artifact echo: echo: hello", "state completed: done", "final state: completed"}
	if len(lines) != len(want) {
		t.Fatalf("stream printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], w)
		}
	}
	if !strings.HasSuffix(lines[0], ": submitted") {
		t.Errorf("first line = %q, want the new task submitted", lines[0])
	}
}

func TestSendStreamJSON(t *testing.T) {
	url := startAgent(t, true)
	events := decodeEvents(t, mustRun(t, "send", url, "hello", "--stream", "--json"))
	if len(events) != 4 {
		t.Fatalf("got %d events, want task, working, artifact, completed: %#v", len(events), events)
	}
	task, ok := events[0].(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("event 1 = %#v, want the submitted task", events[0])
	}
	if st, ok := events[1].(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateWorking {
		t.Errorf("event 2 = %#v, want working", events[1])
	}
	if art, ok := events[2].(*a2a.TaskArtifactUpdateEvent); !ok || art.Artifact.Parts[0].Text() != "echo: hello" {
		t.Errorf("event 3 = %#v, want the echo artifact", events[2])
	}
	if st, ok := events[3].(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
		t.Errorf("event 4 = %#v, want completed", events[3])
	}
	for i, ev := range events {
		if ev.TaskInfo().TaskID != task.ID {
			t.Errorf("event %d belongs to task %s, want %s", i+1, ev.TaskInfo().TaskID, task.ID)
		}
	}
}

// firstWriteHook calls hook once, after the first write to it.
type firstWriteHook struct {
	bytes.Buffer
	hook func()
}

func (w *firstWriteHook) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if w.hook != nil {
		w.hook()
		w.hook = nil
	}
	return n, err
}

func TestSendStreamInterruptIsCleanStop(t *testing.T) {
	url := startAgent(t, true)
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	// The interrupt arrives once the first event is printed, while the task is still working.
	out := &firstWriteHook{hook: interrupt}
	err := run(ctx, []string{"send", url, "wait", "--stream"}, out, io.Discard)
	if err != nil {
		t.Fatalf("interrupted stream returned %v, want a clean stop", err)
	}
	if strings.Contains(out.String(), "final state") || !strings.HasPrefix(out.String(), "task ") {
		t.Errorf("output = %q, want the first event only", out.String())
	}
}

func TestSendTimeout(t *testing.T) {
	url := startAgent(t, true)
	_, _, err := runCLI(t.Context(), "send", url, "wait", "--timeout", "100ms")
	if err == nil || !strings.Contains(err.Error(), "send message: timed out after 100ms") {
		t.Errorf("err = %v, want a timeout of send message", err)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit code = %d, want 1", exitCode(err))
	}
}

func TestGet(t *testing.T) {
	url := startAgent(t, true)
	sent := sendTask(t, url, "hello")

	out := mustRun(t, "get", url, string(sent.ID))
	assertInOrder(t, out, "task: "+string(sent.ID)+"\n", "context: "+sent.ContextID+"\n", "state: completed\n", "artifact echo: echo: hello\n")
	if strings.Contains(out, "history") {
		t.Errorf("get without --history printed history:\n%s", out)
	}

	out = mustRun(t, "get", url, string(sent.ID), "--history", "5")
	assertInOrder(t, out, "state: completed\n", "history user: hello\n")

	var got a2a.Task
	if err := json.Unmarshal([]byte(mustRun(t, "get", "--json", url, string(sent.ID))), &got); err != nil {
		t.Fatalf("get --json: %v", err)
	}
	if got.ID != sent.ID || got.Status.State != a2a.TaskStateCompleted || artifactText(t, &got) != "echo: hello" {
		t.Errorf("get --json = %+v, want the completed task %s", got, sent.ID)
	}
}

func TestGetUnknownTask(t *testing.T) {
	url := startAgent(t, true)
	_, _, err := runCLI(t.Context(), "get", url, "no-such-task")
	if err == nil || !strings.HasPrefix(err.Error(), "get task no-such-task: ") || !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("err = %v, want task not found, named after the operation", err)
	}
	if !strings.Contains(err.Error(), "task not found") {
		t.Errorf("err = %q, want it to say task not found", err)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit code = %d, want 1", exitCode(err))
	}
}

func TestCancel(t *testing.T) {
	url := startAgent(t, true)
	task := sendTask(t, url, "wait", "--return-immediately")
	if task.Status.State.Terminal() {
		t.Fatalf("task returned immediately in state %s, want it still running", task.Status.State)
	}

	out := mustRun(t, "cancel", url, string(task.ID))
	assertInOrder(t, out, "task: "+string(task.ID)+"\n", "state: canceled\n")

	var got a2a.Task
	if err := json.Unmarshal([]byte(mustRun(t, "get", url, string(task.ID), "--json")), &got); err != nil {
		t.Fatalf("get --json: %v", err)
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("after cancel the task is %s, want canceled", got.Status.State)
	}

	_, _, err := runCLI(t.Context(), "cancel", url, string(task.ID), "--json")
	if err != nil {
		t.Errorf("canceling a canceled task again: %v", err)
	}
}

func TestCancelErrors(t *testing.T) {
	url := startAgent(t, true)
	_, _, err := runCLI(t.Context(), "cancel", url, "no-such-task")
	if err == nil || !strings.HasPrefix(err.Error(), "cancel task no-such-task: ") || !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("err = %v, want task not found, named after the operation", err)
	}

	done := sendTask(t, url, "hello")
	_, _, err = runCLI(t.Context(), "cancel", url, string(done.ID))
	if err == nil || !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("canceling a completed task: err = %v, want task not cancelable", err)
	}
}

func TestTasks(t *testing.T) {
	url := startAgent(t, true)
	first := sendTask(t, url, "one")
	second := sendTask(t, url, "two")

	out := mustRun(t, "tasks", url)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.Fields(lines[0])[0] != "ID" {
		t.Fatalf("tasks printed:\n%s\nwant a header and two rows", out)
	}
	for _, id := range []a2a.TaskID{first.ID, second.ID} {
		if !strings.Contains(out, string(id)) {
			t.Errorf("tasks lacks %s:\n%s", id, out)
		}
	}
	for _, row := range lines[1:] {
		if f := strings.Fields(row); len(f) != 3 || f[1] != "completed" || !strings.HasSuffix(f[2], "Z") {
			t.Errorf("row %q, want id, completed and a UTC time", row)
		}
	}

	out = mustRun(t, "tasks", url, "--page-size", "1")
	_, token, found := strings.Cut(out, "next page: --page-token ")
	if !found {
		t.Fatalf("first page of one task names no next page:\n%s", out)
	}
	rest := mustRun(t, "tasks", url, "--page-size", "1", "--page-token", strings.TrimSpace(token))
	if strings.Contains(rest, "next page") {
		t.Errorf("second and last page names a next page:\n%s", rest)
	}
	onFirst := strings.Contains(out, string(first.ID))
	if onFirst == strings.Contains(rest, string(first.ID)) || onFirst == strings.Contains(out, string(second.ID)) {
		t.Errorf("pages do not split the two tasks:\n%s\n%s", out, rest)
	}

	if out := mustRun(t, "tasks", url, "--state", "working"); out != "no tasks\n" {
		t.Errorf("tasks --state working = %q, want no tasks", out)
	}

	var resp a2a.ListTasksResponse
	if err := json.Unmarshal([]byte(mustRun(t, "tasks", url, "--json", "--context-id", first.ContextID)), &resp); err != nil {
		t.Fatalf("tasks --json: %v", err)
	}
	if len(resp.Tasks) != 1 || resp.Tasks[0].ID != first.ID {
		t.Errorf("tasks --json --context-id = %+v, want only task %s", resp.Tasks, first.ID)
	}
}

func TestTasksUnauthenticated(t *testing.T) {
	url := startAgent(t, false)
	sendTask(t, url, "hello")
	_, _, err := runCLI(t.Context(), "tasks", url)
	if err == nil || !strings.HasPrefix(err.Error(), "list tasks: ") || !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("err = %v, want list tasks refused as unauthenticated", err)
	}
}

func TestUnreachableAgent(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := strings.Replace(srv.URL, "http://", "http://me:s3cret@", 1)
	srv.Close()
	for _, args := range [][]string{
		{"send", url, "hello"},
		{"send", url, "hello", "--stream"},
		{"get", url, "t1"},
		{"cancel", url, "t1"},
		{"tasks", url},
	} {
		out, errOut, err := runCLI(t.Context(), args...)
		if err == nil || exitCode(err) != 1 {
			t.Errorf("%v: err = %v, want a plain error", args, err)
			continue
		}
		if !strings.Contains(err.Error(), "get agent card from") {
			t.Errorf("%v: err = %q, want it to say the card could not be fetched", args, err)
		}
		if strings.Contains(err.Error()+out+errOut, "s3cret") {
			t.Errorf("%v: output reveals the password: %q", args, err.Error()+out+errOut)
		}
	}
}

func TestNotAnAgent(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, _, err := runCLI(t.Context(), "get", srv.URL, "t1")
	if err == nil || !strings.Contains(err.Error(), "get task t1: get agent card from") || !strings.Contains(err.Error(), "404") {
		t.Errorf("err = %v, want the card's 404 named", err)
	}
}

func TestClientUsageErrors(t *testing.T) {
	const url = "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"send"}, "missing URL and TEXT"},
		{[]string{"send", url}, "missing TEXT"},
		{[]string{"send", url, "a", "b"}, `unexpected argument "b"`},
		{[]string{"send", url, ""}, "TEXT is empty"},
		{[]string{"send", "ftp://host", "hi"}, "http:// or https://"},
		{[]string{"send", "localhost:8080", "hi"}, "http:// or https://"},
		{[]string{"send", url, "hi", "--stream", "--return-immediately"}, "--return-immediately"},
		{[]string{"send", url, "hi", "--no-such-flag"}, "no-such-flag"},
		{[]string{"send", url, "hi", "--timeout", "soon"}, "timeout"},
		{[]string{"get", url}, "missing TASK_ID"},
		{[]string{"get", url, "t1", "--history", "-1"}, "--history"},
		{[]string{"cancel"}, "missing URL and TASK_ID"},
		{[]string{"tasks"}, "missing URL"},
		{[]string{"tasks", url, "--page-size", "101"}, "--page-size"},
		{[]string{"tasks", url, "--state", "sleeping"}, `unknown --state "sleeping"`},
	} {
		_, _, err := runCLI(t.Context(), tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v (exit code %d), want a usage error mentioning %q", tc.args, err, exitCode(err), tc.want)
		}
	}
}

func TestClientHelp(t *testing.T) {
	for cmd, flags := range map[string][]string{
		"send":   {"--stream", "--json", "--task-id", "--context-id", "--return-immediately", "--timeout"},
		"get":    {"--history", "--json", "--timeout"},
		"cancel": {"--json", "--timeout"},
		"tasks":  {"--context-id", "--state", "--page-size", "--page-token", "--json", "--timeout"},
	} {
		out, _, err := runCLI(t.Context(), cmd, "--help")
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s --help: err = %v, want flag.ErrHelp", cmd, err)
		}
		if !strings.HasPrefix(out, "Usage: handoff "+cmd+" URL") {
			t.Errorf("%s --help starts %q, want the synopsis", cmd, out)
		}
		for _, f := range flags {
			if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
				t.Errorf("%s --help lacks %s:\n%s", cmd, f, out)
			}
		}
	}
}

func TestParseState(t *testing.T) {
	for in, want := range map[string]a2a.TaskState{
		"completed":           a2a.TaskStateCompleted,
		"input-required":      a2a.TaskStateInputRequired,
		"AUTH_REQUIRED":       a2a.TaskStateAuthRequired,
		"TASK_STATE_CANCELED": a2a.TaskStateCanceled,
	} {
		if got, err := parseState(in); err != nil || got != want {
			t.Errorf("parseState(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	if stateName(a2a.TaskStateInputRequired) != "input-required" {
		t.Errorf("stateName(%s) = %q, want input-required", a2a.TaskStateInputRequired, stateName(a2a.TaskStateInputRequired))
	}
}

func TestPartSummary(t *testing.T) {
	raw := a2a.NewRawPart([]byte("12345"))
	raw.Filename, raw.MediaType = "a.bin", "application/octet-stream"
	for _, tc := range []struct {
		part *a2a.Part
		want string
	}{
		{a2a.NewTextPart("hi"), "hi"},
		{a2a.NewDataPart(map[string]any{"n": 1}), `[data] {"n":1}`},
		{a2a.NewFileURLPart("https://u:pw@files.example/x.png", "image/png"), "[file image/png] https://u:xxxxx@files.example/x.png"},
		{raw, "[file a.bin, application/octet-stream, 5 bytes]"},
	} {
		if got := partSummary(tc.part); got != tc.want {
			t.Errorf("partSummary = %q, want %q", got, tc.want)
		}
	}
}
