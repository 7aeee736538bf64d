package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// countingExec counts the executions scriptExec starts.
type countingExec struct {
	*scriptExec
	runs atomic.Int32
}

func (x *countingExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.runs.Add(1)
	return x.scriptExec.Execute(ctx, ec)
}

func keyedSend(text, key, tenant string) *a2a.SendMessageRequest {
	req := send(text)
	req.Tenant = tenant
	req.Message.Metadata = map[string]any{"key": key}
	return req
}

func metadataKey(m *a2a.Message) string {
	k, _ := m.Metadata["key"].(string)
	return k
}

// TestIdempotencyKey: repeats of one caller's key, blocking, streaming and
// concurrent, all get the one task its first message started; another
// caller's same key starts its own; the key still holds after a restart.
func TestIdempotencyKey(t *testing.T) {
	dir := t.TempDir()
	x := &countingExec{scriptExec: &scriptExec{release: make(chan struct{})}}
	st2, e2 := openEngine(t, dir, x, tasks.WithIdempotencyKey(metadataKey))

	first := keyedSend("wait", "k1", "")
	first.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e2.SendMessage(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID

	// A repeat by stream, while the task runs: the task, then its events to the end.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	streamed := make(chan []a2a.Event, 1)
	gotTask := make(chan struct{})
	go func() {
		var evs []a2a.Event
		for ev, err := range e2.SendStreamingMessage(ctx, keyedSend("wait", "k1", "")) {
			if err != nil {
				t.Error(err)
				break
			}
			if len(evs) == 0 {
				close(gotTask)
			}
			evs = append(evs, ev)
		}
		streamed <- evs
	}()
	<-gotTask

	// Concurrent blocking repeats wait for the one task.
	var wg sync.WaitGroup
	results := make([]*a2a.Task, 8)
	for i := range results {
		wg.Go(func() {
			res, err := e2.SendMessage(ctx, keyedSend("wait", "k1", ""))
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res.(*a2a.Task)
		})
	}
	close(x.release)
	wg.Wait()
	for i, r := range results {
		if r == nil || r.ID != id || r.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("repeat %d: %v, want task %s completed", i, r, id)
		}
	}
	evs := <-streamed
	if tk, ok := evs[0].(*a2a.Task); !ok || tk.ID != id {
		t.Fatalf("streamed repeat opened with %#v", evs[0])
	}
	if last, ok := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent); !ok || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("streamed repeat ended with %#v", evs[len(evs)-1])
	}

	// A finished task's repeat: the task as it ended, by stream too.
	evs = nil
	for ev, err := range e2.SendStreamingMessage(ctx, keyedSend("wait", "k1", "")) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 1 || evs[0].(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("stream repeat of a finished task: %v", evs)
	}
	if n := x.runs.Load(); n != 1 {
		t.Fatalf("%d executions for one key, want 1", n)
	}

	// Another caller's key is its own.
	res, err = e2.SendMessage(ctx, keyedSend("hello", "k1", "other-tenant"))
	if err != nil || res.(*a2a.Task).ID == id {
		t.Fatalf("another caller's same key: %v %v", res, err)
	}
	// Without a key every message starts a task.
	res, err = e2.SendMessage(ctx, send("hello"))
	if err != nil || res.(*a2a.Task).ID == id {
		t.Fatalf("no key: %v %v", res, err)
	}

	// After a restart the store still knows the key's task.
	shutdown(e2)
	st2.Close()
	y := &countingExec{scriptExec: &scriptExec{release: make(chan struct{})}}
	_, e3 := openEngine(t, dir, y, tasks.WithIdempotencyKey(metadataKey))
	res, err = e3.SendMessage(ctx, keyedSend("wait", "k1", ""))
	if err != nil || res.(*a2a.Task).ID != id || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted || y.runs.Load() != 0 {
		t.Fatalf("repeat after restart: %v %v (%d executions)", res, err, y.runs.Load())
	}
}

func shutdown(e *tasks.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.Shutdown(ctx)
}

// openEngine is newEngine with the executor given.
func openEngine(t *testing.T, dir string, x a2asrv.AgentExecutor, opts ...tasks.Option) (*boltstore.Store, *tasks.Engine) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, err := tasks.NewEngine(t.Context(), st, x, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		shutdown(e)
		st.Close()
	})
	return st, e
}

// TestIdempotencyKeyReusedWithOtherContent: a key repeated with another
// message is refused (InvalidParams, -32602 on the wire) with the digest of
// the first message, blocking or streaming, before and after a restart; the
// same message still gets the first task.
func TestIdempotencyKeyReusedWithOtherContent(t *testing.T) {
	dir := t.TempDir()
	x := &countingExec{scriptExec: &scriptExec{release: make(chan struct{})}}
	st, e := openEngine(t, dir, x, tasks.WithIdempotencyKey(metadataKey))
	res, err := e.SendMessage(t.Context(), keyedSend("hello", "k2", ""))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	if res, err := e.SendMessage(t.Context(), keyedSend("hello", "k2", "")); err != nil || res.(*a2a.Task).ID != id {
		t.Fatalf("same content, same key: %v %v, want task %s", res, err, id)
	}
	refused := func(e *tasks.Engine) string {
		t.Helper()
		_, err := e.SendMessage(t.Context(), keyedSend("goodbye", "k2", ""))
		var ae *a2a.Error
		if !errors.Is(err, a2a.ErrInvalidParams) || !errors.As(err, &ae) ||
			!strings.Contains(ae.Message, "idempotency key reused with different content") || !strings.Contains(ae.Message, "sha256:") {
			t.Fatalf("other content, same key: %v, want InvalidParams naming the first message's digest", err)
		}
		_, serr := collect(t, e.SendStreamingMessage(t.Context(), keyedSend("goodbye", "k2", "")))
		if !errors.Is(serr, a2a.ErrInvalidParams) {
			t.Fatalf("other content, same key, streaming: %v", serr)
		}
		return ae.Message
	}
	before := refused(e)

	// On the wire: JSON-RPC -32602 with the message.
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(e))
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m9","role":"ROLE_USER",` +
		`"metadata":{"key":"k2"},"parts":[{"text":"goodbye"}]}}}`
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rpc struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rpc)
	resp.Body.Close()
	if err != nil || rpc.Error == nil || rpc.Error.Code != -32602 || rpc.Error.Message != before {
		t.Fatalf("JSON-RPC answer: %+v %v, want -32602 %q", rpc.Error, err, before)
	}

	shutdown(e)
	st.Close()
	_, e2 := openEngine(t, dir, x, tasks.WithIdempotencyKey(metadataKey))
	if after := refused(e2); after != before {
		t.Fatalf("after a restart the refusal says %q, before %q", after, before)
	}
	if res, err := e2.SendMessage(t.Context(), keyedSend("hello", "k2", "")); err != nil || res.(*a2a.Task).ID != id {
		t.Fatalf("same content after a restart: %v %v", res, err)
	}
	if n := x.runs.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}
