package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/acceptance"
)

// shouter is an executor written for a2a-go: it answers every request with
// its text in capitals.
type shouter struct{}

func (shouter) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		var text string
		for _, p := range ec.Message.Parts {
			text += p.Text()
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(strings.ToUpper(text))), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (shouter) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// serve runs agent on a loopback port until stop is called.
func serve(agent *handoff.Agent) (url string, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			log.Fatal(err)
		}
	}
}

// The agent's skill "shout" is the program's own executor; Handoff keeps
// its card, its tasks and their durable log around it.
func ExampleWithExecutor() {
	dir, _ := os.MkdirTemp("", "handoff-example")
	defer os.RemoveAll(dir)
	cfg, err := handoff.ParseConfig("agent.yaml", strings.NewReader(`
name: Shouter
description: Answers in capitals.
auth: {anonymous: true}
limits: {shutdown_grace: 1s}
skills:
  - {id: shout, name: Shout, executor: go}
`))
	if err != nil {
		log.Fatal(err)
	}
	cfg.DataDir = dir
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	agent, err := handoff.New(context.Background(), cfg, handoff.WithExecutor("shout", shouter{}), handoff.WithLogger(quiet))
	if err != nil {
		log.Fatal(err)
	}
	url, stop := serve(agent)
	defer stop()

	req, _ := http.NewRequest(http.MethodPost, url+"/a2a/jsonrpc", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`))
	req.Header.Set("A2A-Version", "1.0")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(strings.Contains(string(body), `"TASK_STATE_COMPLETED"`), strings.Contains(string(body), `"HELLO"`))
	// Output: true true
}

// Inside a Go executor's Execute, Tools reaches the agent's MCP tools
// through the governed pipeline. A call that needs an approval returns an
// error wrapping ErrApprovalRequired: yield it and return, and the task
// waits for an approver; outside an Execute, or in an agent without MCP
// servers, the calls fail with ErrNoTools.
func ExampleTools() {
	execute := func(ctx context.Context) error {
		res, err := handoff.Tools(ctx).Call(ctx, "notes__read_note", map[string]any{"name": "n1"})
		switch {
		case errors.Is(err, handoff.ErrApprovalRequired):
			return err // the task goes input-required with the approval request
		case err != nil:
			return err
		case res.Err != nil:
			return fmt.Errorf("the note could not be read: %w", res.Err)
		}
		fmt.Println(res.Text)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(errors.Is(execute(ctx), handoff.ErrNoTools))
	// Output: true
}

// Inside a Go executor's Execute, Delegate hands a message to a verified
// peer through one of the agent's delegate skills and returns the
// acceptance gate's decision: only a Committed outcome is a fact, with the
// committed artifacts as its evidence. Outside an Execute, or in an agent
// without peers, it fails with ErrNoDelegation.
func ExampleDelegate() {
	report := func(ctx context.Context) (string, error) {
		d, err := handoff.Delegate(ctx, "count-notes", a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("count")))
		if err != nil {
			return "", err
		}
		if d.Outcome != acceptance.Committed {
			return "", fmt.Errorf("not committed (%s): %s", d.Outcome, d.Reason)
		}
		return fmt.Sprintf("%d committed artifacts from %s", len(d.Artifacts), d.Peer), nil
	}
	_, err := report(context.Background())
	fmt.Println(errors.Is(err, handoff.ErrNoDelegation))
	// Output: true
}
