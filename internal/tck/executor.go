package tck

import (
	"context"
	"errors"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// DefaultResubscribeDelay is how long a test-resubscribe-message-id task
// stays in working before it completes. The TCK requires at least twice its
// streaming timeout (2 s by default); 10 s leaves room for slow runners and a
// raised timeout.
const DefaultResubscribeDelay = 10 * time.Second

// Executor is the TCK agent. Create it with [New]; it holds no per-task
// state, so one Executor serves any number of concurrent executions.
type Executor struct {
	resubscribeDelay time.Duration
	// wait blocks for d or until ctx is done. It is a field so tests can hold
	// a task in working for exactly as long as they need, instead of racing
	// a timer.
	wait func(ctx context.Context, d time.Duration) error
}

var _ a2asrv.AgentExecutor = (*Executor)(nil)

// Option configures an [Executor].
type Option func(*Executor)

// WithResubscribeDelay sets how long a test-resubscribe-message-id task
// stays in working before it completes (default [DefaultResubscribeDelay]).
func WithResubscribeDelay(d time.Duration) Option {
	return func(e *Executor) { e.resubscribeDelay = d }
}

// New returns an Executor configured by opts.
func New(opts ...Option) *Executor {
	e := &Executor{resubscribeDelay: DefaultResubscribeDelay, wait: sleep}
	for _, opt := range opts {
		opt(e)
	}
	return e
}

// errNoMessage answers an execution without a message; a2asrv only passes a
// nil message to Cancel, so this guards direct callers.
var errNoMessage = errors.New("tck: execution has no message")

// Execute plays the script chosen by the message id prefix (see the package
// documentation). A new task opens with its submitted Task event; a message
// to an existing task completes it with an echo.
func (e *Executor) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if execCtx.Message == nil {
			yield(nil, errNoMessage)
			return
		}
		r := &run{ctx: ctx, execCtx: execCtx, yield: yield}
		if execCtx.StoredTask != nil {
			// A follow-up that is itself a tck-input-required message asks
			// for input again (the TCK's multi-turn history checks rely on
			// it); any other completes the task, which is how the TCK
			// answers tck-input-required. a2a-go would refuse a bare Message
			// (tck-message-response) on a task that already exists.
			if strings.HasPrefix(execCtx.Message.ID, inputRequiredPrefix) {
				r.status(a2a.TaskStateInputRequired, r.agentText(inputText))
				return
			}
			r.status(a2a.TaskStateCompleted, r.echo())
			return
		}
		sc := scenarioFor(execCtx.Message.ID)
		if sc.respondsWithMessage {
			sc.play(e, r)
			return
		}
		if !r.emit(a2a.NewSubmittedTask(execCtx, execCtx.Message)) {
			return
		}
		sc.play(e, r)
	}
}

// Cancel moves the task to canceled. None of the scripts hold anything that
// needs undoing; a running wait stops because a2a-go cancels the execution's
// context once the canceled status has been applied.
func (e *Executor) Cancel(_ context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

// scenario is the script run for messages whose id starts with prefix.
type scenario struct {
	prefix string
	// respondsWithMessage marks scripts that answer with a Message instead of
	// a task, so Execute must not open one first.
	respondsWithMessage bool
	// play emits the events after the submitted task and reports whether the
	// consumer took them all; its result only lets scripts chain with &&.
	play func(e *Executor, r *run) bool
}

// inputRequiredPrefix starts the ids of messages that ask for input, on a
// new task or on one already waiting.
const inputRequiredPrefix = "tck-input-required"

// Fixed texts of the scripts; the TCK checks most of them verbatim.
const (
	completeText   = "Hello from TCK"
	artifactText   = "Generated text content"
	messageText    = "Direct message response"
	inputText      = "Please provide input to continue"
	rejectText     = "rejected"
	fileName       = "output.txt"
	fileMediaType  = "text/plain"
	fileContent    = "Generated file content"
	fileURL        = "https://example.com/output.txt"
	chunk1, chunk2 = "chunk-1 ", "chunk-2"
)

// Parts are built afresh for every execution (see completeWithArtifact), so
// these are constructors rather than values.

func newText(s string) func() *a2a.Part {
	return func() *a2a.Part { return a2a.NewTextPart(s) }
}

func dataPart() *a2a.Part {
	return a2a.NewDataPart(map[string]any{"key": "value", "count": 42})
}

func filePart() *a2a.Part {
	p := a2a.NewRawPart([]byte(fileContent))
	p.Filename, p.MediaType = fileName, fileMediaType
	return p
}

func fileURLPart() *a2a.Part {
	p := a2a.NewFileURLPart(fileURL, fileMediaType)
	p.Filename = fileName
	return p
}

// scenarios lists every scripted prefix; scenarioFor picks the longest match,
// so the order here does not matter.
var scenarios = []scenario{
	{prefix: "tck-complete-task", play: func(_ *Executor, r *run) bool {
		return r.status(a2a.TaskStateCompleted, r.agentText(completeText))
	}},
	{prefix: "tck-artifact-text", play: completeWithArtifact(newText(artifactText))},
	{prefix: "tck-artifact-file", play: completeWithArtifact(filePart)},
	{prefix: "tck-artifact-file-url", play: completeWithArtifact(fileURLPart)},
	{prefix: "tck-artifact-data", play: completeWithArtifact(dataPart)},
	{prefix: "tck-message-response", respondsWithMessage: true, play: func(_ *Executor, r *run) bool {
		msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(messageText))
		// No task exists, so the reply names the context only.
		msg.ContextID = r.execCtx.ContextID
		return r.emit(msg)
	}},
	{prefix: inputRequiredPrefix, play: func(_ *Executor, r *run) bool {
		return r.status(a2a.TaskStateInputRequired, r.agentText(inputText))
	}},
	{prefix: "tck-reject-task", play: func(_ *Executor, r *run) bool {
		return r.status(a2a.TaskStateRejected, r.agentText(rejectText))
	}},
	{prefix: "tck-stream-001", play: streamArtifact(newText("Stream hello from TCK"))},
	{prefix: "tck-stream-002", play: func(_ *Executor, r *run) bool {
		return r.status(a2a.TaskStateCompleted, nil)
	}},
	{prefix: "tck-stream-003", play: streamArtifact(newText("Stream task lifecycle"))},
	{prefix: "tck-stream-ordering-001", play: streamArtifact(newText("Ordered output"))},
	{prefix: "tck-stream-artifact-text", play: streamArtifact(newText("Streamed text content"))},
	{prefix: "tck-stream-artifact-file", play: streamArtifact(filePart)},
	{prefix: "tck-stream-artifact-chunked", play: func(_ *Executor, r *run) bool {
		if !r.status(a2a.TaskStateWorking, nil) {
			return false
		}
		first := a2a.NewArtifactEvent(r.execCtx, a2a.NewTextPart(chunk1))
		if !r.emit(first) {
			return false
		}
		// NewArtifactUpdateEvent sets Append, so chunk-2 joins chunk-1 in
		// the same artifact rather than replacing it.
		last := a2a.NewArtifactUpdateEvent(r.execCtx, first.Artifact.ID, a2a.NewTextPart(chunk2))
		last.LastChunk = true
		return r.emit(last) && r.status(a2a.TaskStateCompleted, nil)
	}},
	{prefix: "test-resubscribe-message-id", play: func(e *Executor, r *run) bool {
		if !r.status(a2a.TaskStateWorking, nil) {
			return false
		}
		if err := e.wait(r.ctx, e.resubscribeDelay); err != nil {
			// a2a-go cancels the context only once it has stopped reading
			// (the task was canceled, or the execution is torn down), so no
			// failed status could be delivered; the error just ends the run.
			return r.yield(nil, err)
		}
		return r.status(a2a.TaskStateCompleted, nil)
	}},
}

// echoScenario answers every message no prefix matches.
var echoScenario = scenario{play: func(_ *Executor, r *run) bool {
	return r.status(a2a.TaskStateCompleted, r.echo())
}}

// scenarioFor returns the scenario with the longest prefix of id, or the
// echo scenario.
func scenarioFor(id string) scenario {
	best := echoScenario
	for _, sc := range scenarios {
		if strings.HasPrefix(id, sc.prefix) && len(sc.prefix) > len(best.prefix) {
			best = sc
		}
	}
	return best
}

// completeWithArtifact completes the task with one artifact holding a part
// from newPart. The part is new each time because a2a-go keeps the events it
// is given and hands them to other goroutines; a shared part would tie
// executions together.
func completeWithArtifact(newPart func() *a2a.Part) func(*Executor, *run) bool {
	return func(_ *Executor, r *run) bool {
		return r.emit(a2a.NewArtifactEvent(r.execCtx, newPart())) && r.status(a2a.TaskStateCompleted, nil)
	}
}

// streamArtifact is the streaming lifecycle: working, one artifact, completed.
func streamArtifact(newPart func() *a2a.Part) func(*Executor, *run) bool {
	return func(e *Executor, r *run) bool {
		return r.status(a2a.TaskStateWorking, nil) && completeWithArtifact(newPart)(e, r)
	}
}

// run is one execution: where its events go and the ids they carry.
type run struct {
	ctx     context.Context
	execCtx *a2asrv.ExecutorContext
	yield   func(a2a.Event, error) bool
}

// emit hands ev to the consumer and reports whether it wants more.
func (r *run) emit(ev a2a.Event) bool { return r.yield(ev, nil) }

// status emits a status update to state, with an optional agent message.
func (r *run) status(state a2a.TaskState, msg *a2a.Message) bool {
	return r.emit(a2a.NewStatusUpdateEvent(r.execCtx, state, msg))
}

// agentText is an agent message of the task holding text.
func (r *run) agentText(text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, r.execCtx, a2a.NewTextPart(text))
}

// echo is an agent message repeating the text parts of the incoming
// message, or nil when it has none (a message needs at least one part).
func (r *run) echo() *a2a.Message {
	var parts []*a2a.Part
	for _, p := range r.execCtx.Message.Parts {
		if text, ok := p.Content.(a2a.Text); ok {
			parts = append(parts, a2a.NewTextPart(string(text)))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, r.execCtx, parts...)
}

// sleep waits for d, returning early with the context's cause when ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
