package skill

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// scripted yields its events, built for the execution's context.
type scripted func(ec *a2asrv.ExecutorContext) []a2a.Event

func (s scripted) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		for _, ev := range s(ec) {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (s scripted) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

// chunked answers {"n": N} as a data artifact sent in two chunks: the
// first a text part, the second (appended) the data.
func chunked(n int) scripted {
	return func(ec *a2asrv.ExecutorContext) []a2a.Event {
		first := a2a.NewArtifactEvent(ec, a2a.NewTextPart("count follows"))
		second := a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, a2a.NewDataPart(map[string]any{"n": n}))
		return []a2a.Event{a2a.NewSubmittedTask(ec, ec.Message), first, second, a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil)}
	}
}

func newTaskEC() *a2asrv.ExecutorContext {
	return &a2asrv.ExecutorContext{TaskID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), User: caller("alice"),
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("count"))}
}

// TestOutputAssemblesChunks: an artifact sent in chunks is checked whole
// (its data part is the result) and reaches the task whole, once, after
// the schema passed; nothing reaches it before.
func TestOutputAssemblesChunks(t *testing.T) {
	schema, err := CompileOutputSchema(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "maximum": 5}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n     int
		state a2a.TaskState
	}{{3, a2a.TaskStateCompleted}, {9, a2a.TaskStateFailed}} {
		evs := run(t, NewOutput("s", chunked(tc.n), OutputSpec{Schema: schema}, nil), newTaskEC())
		var arts []*a2a.Artifact
		for _, ev := range evs {
			if e, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
				arts = append(arts, e.Artifact)
			}
		}
		st, msg := last(evs)
		if st != tc.state {
			t.Fatalf("n=%d: %s %q, want %s", tc.n, st, messageText(msg), tc.state)
		}
		if tc.state == a2a.TaskStateFailed {
			if len(arts) != 0 || !strings.HasPrefix(messageText(msg), "Not committed: schema: ") {
				t.Errorf("n=%d: artifacts %v, status %q: want none, and the schema's reason", tc.n, arts, messageText(msg))
			}
			continue
		}
		if len(arts) != 1 || len(arts[0].Parts) != 2 || arts[0].Parts[1].Data() == nil {
			t.Errorf("n=%d: artifacts %+v, want the one artifact with both chunks", tc.n, arts)
		}
	}
}

// TestOutputRefusesAMessage: an executor behind an output gate that
// answers with a message, not a task, is refused: there is nothing to hold
// until the gate decides.
func TestOutputRefusesAMessage(t *testing.T) {
	x := scripted(func(ec *a2asrv.ExecutorContext) []a2a.Event {
		return []a2a.Event{a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("done"))}
	})
	var got error
	for _, err := range NewOutput("s", x, OutputSpec{}, nil).Execute(t.Context(), newTaskEC()) {
		got = err
	}
	if !errors.Is(got, a2a.ErrInvalidAgentResponse) {
		t.Fatalf("error %v, want ErrInvalidAgentResponse", got)
	}
}

// TestOutputWaitingResultOutlivesTheProcess: a result waiting for its
// approver is in the state file: an Output on the reopened file (a
// restarted agent) takes the approval and completes the task with the
// artifacts, without running the executor again.
func TestOutputWaitingResultOutlivesTheProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := OpenBoltState(path)
	if err != nil {
		t.Fatal(err)
	}
	aw, err := CompileApprovalWhen("result.n > 1")
	if err != nil {
		t.Fatal(err)
	}
	spec := OutputSpec{ApprovalWhen: aw, IsApprover: func(p string) bool { return p == "key:ops" }, State: st}
	ec := newTaskEC()
	state, msg := last(run(t, NewOutput("s", chunked(4), spec, nil), ec))
	if state != a2a.TaskStateInputRequired {
		t.Fatalf("%s %q, want input-required", state, messageText(msg))
	}
	req := approvalRequest(t, msg)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if spec.State, err = OpenBoltState(path); err != nil {
		t.Fatal(err)
	}
	defer spec.State.(*BoltState).Close()
	ran := false
	again := scripted(func(*a2asrv.ExecutorContext) []a2a.Event { ran = true; return nil })
	ec.StoredTask = &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}
	ec.Message = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{ApprovalKey: req}))
	ec.User = caller("key:ops")
	evs := run(t, NewOutput("s", again, spec, nil), ec)
	if state, msg := last(evs); state != a2a.TaskStateCompleted || ran {
		t.Fatalf("after the approval: %s %q (executor ran again: %v), want completed", state, messageText(msg), ran)
	}
	if _, ok := evs[len(evs)-2].(*a2a.TaskArtifactUpdateEvent); !ok {
		t.Fatalf("events %v, want the held artifact before the completion", evs)
	}
	if b, err := spec.State.Load(t.Context(), outputKey(ec.TaskID)); err != nil || b != nil {
		t.Errorf("the waiting result is still kept after the task ended: %s, %v", b, err)
	}
}

// TestOutputReadsTheStatusText: an executor that answers in its completed
// status only (no artifacts) has that text as its result.
func TestOutputReadsTheStatusText(t *testing.T) {
	schema, err := CompileOutputSchema(map[string]any{"type": "string", "pattern": "^saved "})
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]a2a.TaskState{"saved n1": a2a.TaskStateCompleted, "lost n1": a2a.TaskStateFailed} {
		x := scripted(func(ec *a2asrv.ExecutorContext) []a2a.Event {
			return []a2a.Event{a2a.NewSubmittedTask(ec, ec.Message), a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, agentText(ec, text))}
		})
		if st, msg := last(run(t, NewOutput("s", x, OutputSpec{Schema: schema}, nil), newTaskEC())); st != want {
			t.Errorf("%q: %s %q, want %s", text, st, messageText(msg), want)
		}
	}
}
