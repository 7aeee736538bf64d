package main

import (
	"context"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// resumableAgent works until its context ends and can resume its tasks, as a delegation
// can: an engine that shuts down leaves such a task working, for its next start.
type resumableAgent struct{ working chan struct{} }

func (a resumableAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		close(a.working)
		<-ctx.Done()
	}
}

func (resumableAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (resumableAgent) CanResume(*a2a.Task) bool { return true }

func (a resumableAgent) Resume(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return a.Execute(ctx, ec)
}

// TestSendExitsNonZeroOnUnfinishedTask: a blocking send answered with a task that is
// still working (the agent stopped, leaving the task to resume) is a failure of the
// command, and it says which task and why.
func TestSendExitsNonZeroOnUnfinishedTask(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "tasks.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agent := resumableAgent{working: make(chan struct{})}
	engine, err := tasks.NewEngine(t.Context(), st, agent, tasks.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{
		Name: "stopping agent", Description: "stops while working", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: srv.URL, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"}},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
	mux.Handle("/.well-known/agent-card.json", a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/", a2asrv.NewJSONRPCHandler(engine))

	go func() { // the agent stops while the task works, with no grace to finish it
		<-agent.working
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		engine.Shutdown(ctx)
	}()
	stdout, stderr, err := runCLI(t.Context(), "send", srv.URL, "hello")
	if err == nil {
		t.Fatalf("send of a task left working exited 0\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if exitCode(err) != 1 {
		t.Errorf("exit code = %d, want 1", exitCode(err))
	}
	if !strings.Contains(err.Error(), "is still working") || !strings.Contains(err.Error(), "handoff get") {
		t.Errorf("error = %q, want it to say the task is still working and how to follow it", err)
	}
	if !strings.Contains(stdout, "state: working") {
		t.Errorf("stdout = %q, want the task as returned", stdout)
	}
}
