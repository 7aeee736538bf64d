package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/handoff-a2a/handoff/tasks"
)

// Sender sends a delegated message to a verified peer and follows the
// peer's task to its end: by stream, asking GetTask whenever a stream
// ends without the task's end and resubscribing while it runs, then one
// GetTask for the whole final task.
type Sender struct {
	http         *http.Client
	resubscribes int
}

// NewSender returns a Sender. Its HTTP client has no overall timeout
// (streams are long: contexts bound every call). It follows a peer's task
// until the task ends or ctx does, and gives up sooner only when the peer
// answered neither a subscribe nor a GetTask 6 times in a row.
func NewSender(opts ...SenderOption) *Sender {
	s := &Sender{http: &http.Client{}, resubscribes: 5}
	for _, o := range opts {
		o.applySender(s)
	}
	return s
}

// extensionHeader activates the envelope extension on every request.
type extensionHeader struct{ next http.RoundTripper }

func (e extensionHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Add("A2A-Extensions", EnvelopeExtension)
	return e.next.RoundTrip(r)
}

// maxErrorBody bounds a JSON-RPC error body read in place of a stream.
const maxErrorBody = 64 << 10

// jsonErrorAsEvent shows a2a-go's client the JSON-RPC error a peer sends
// as a plain JSON body to a streaming request: the JS SDK 1.x answers a
// subscribe to a finished task that way (HTTP 200, application/json,
// -32004), which the client, reading only SSE data lines, takes for an
// empty stream. The body becomes one SSE event, so the error surfaces.
type jsonErrorAsEvent struct{ next http.RoundTripper }

func (j jsonErrorAsEvent) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := j.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.URL.Redacted(), err)
	}
	var line bytes.Buffer
	if err := json.Compact(&line, body); err != nil {
		return nil, fmt.Errorf("%s answered a stream with JSON that does not parse: %w", r.URL.Redacted(), err)
	}
	resp.Body = io.NopCloser(strings.NewReader("data: " + line.String() + "\n\n"))
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return resp, nil
}

// client returns an a2a-go client for the peer's card, with the envelope
// extension activated on every request.
func (s *Sender) client(ctx context.Context, peer PeerStatus) (*a2aclient.Client, error) {
	if peer.State != StateVerified || peer.Card == nil {
		return nil, fmt.Errorf("delegate to %s: the peer's card is not verified", peer.Name)
	}
	next := s.http.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc := &http.Client{Transport: extensionHeader{next: jsonErrorAsEvent{next: next}}, Jar: s.http.Jar}
	// Built from the card, without I/O: even once ctx has ended, the client
	// is needed to cancel the peer's task.
	client, err := a2aclient.NewFromCard(context.WithoutCancel(ctx), peer.Card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC, a2a.TransportProtocolHTTPJSON}}),
		a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		return nil, fmt.Errorf("delegate to %s: %w", peer.Name, err)
	}
	return client, nil
}

// Delegate sends msg, with env attached, to the peer and returns the peer's
// final task. progress sees every event as it arrives; the first one names
// the peer's task. When ctx ends before the peer's task does (a local
// cancel, or the envelope's deadline), the remote task is cancelled too,
// unless ctx ended with cause [tasks.ErrShutdown]: the agent is stopping
// and will follow the peer's task again when it starts. On an error, the
// task returned, if not nil, is the peer's task as last seen (after the
// cancel): where the delegation's record says the peer's task stands.
// Sending the same envelope again (same idempotency key) to a Handoff peer
// follows the task the first send started instead of starting another. An
// envelope without a deadline, or past it, is not sent: the error wraps
// [ErrMalformedEnvelope] or [ErrDeadlinePassed].
func (s *Sender) Delegate(ctx context.Context, peer PeerStatus, msg *a2a.Message, env *Envelope, progress func(a2a.Event)) (*a2a.Task, error) {
	// The receiver would refuse these; saying so here names our own mistake.
	switch {
	case env.Deadline.IsZero():
		return nil, fmt.Errorf("delegate to %s: %w: no deadline", peer.Name, ErrMalformedEnvelope)
	case !time.Now().Before(env.Deadline):
		return nil, fmt.Errorf("delegate to %s: %w: deadline %s", peer.Name, ErrDeadlinePassed, env.Deadline.UTC().Format(time.RFC3339))
	}
	client, err := s.client(ctx, peer)
	if err != nil {
		return nil, err
	}
	defer client.Destroy()
	env.Attach(msg)
	return s.follow(ctx, client, peer, "", client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}), progress)
}

// Follow follows the peer's task remote, which an earlier Delegate started
// (before a restart, say), to its end and returns the final task: by
// subscribing, and with GetTask whenever a subscribe yields no end (a
// peer may answer a subscribe to a finished task in any way). Like
// Delegate, it cancels the remote task when ctx ends first, and on an
// error returns the peer's task as last seen, if it was.
func (s *Sender) Follow(ctx context.Context, peer PeerStatus, remote a2a.TaskID, progress func(a2a.Event)) (*a2a.Task, error) {
	if remote == "" {
		return nil, fmt.Errorf("follow %s: a remote task id is required", peer.Name)
	}
	client, err := s.client(ctx, peer)
	if err != nil {
		return nil, err
	}
	defer client.Destroy()
	return s.follow(ctx, client, peer, remote, nil, progress)
}

// follow reads events (when not nil) and then follows the remote task
// until it reaches a final state, which it returns whole. A subscribe that
// yields no terminal event, whatever the reason (an error in any encoding,
// an empty stream, a closed connection), is followed by a GetTask: the
// peer's own answer decides whether its task ended, so a task that
// finished while we were away is never taken for a lost one. It
// resubscribes, with backoff, while the peer says its task still runs,
// and gives up after s.resubscribes+1 rounds in a row without any answer
// from the peer. When err is not nil, the task returned, if any, is the
// peer's task as last seen (after our cancel when ctx ended first).
func (s *Sender) follow(ctx context.Context, client *a2aclient.Client, peer PeerStatus, remote a2a.TaskID,
	events func(yield func(a2a.Event, error) bool), progress func(a2a.Event)) (*a2a.Task, error) {
	// read follows events to the task's end (nil) or the stream's.
	read := func(events func(yield func(a2a.Event, error) bool)) error {
		for ev, err := range events {
			if err != nil {
				return err
			}
			if remote == "" {
				remote = ev.TaskInfo().TaskID
			}
			if progress != nil {
				progress(ev)
			}
			if terminal(ev) {
				return nil
			}
		}
		return errEndedEarly
	}
	var (
		err  error
		last *a2a.Task // the peer's task as its GetTask last showed it
	)
	if events != nil {
		err = read(events)
	} else if remote != "" {
		err = read(client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: remote}))
	}
	// Whatever the stream said, the whole final task comes from GetTask,
	// which also decides, when the stream said nothing, whether it ended.
	for round, silent := 0, 0; ctx.Err() == nil && remote != ""; round++ {
		task, gerr := client.GetTask(ctx, &a2a.GetTaskRequest{ID: remote})
		switch {
		case gerr == nil && finalState(task.Status.State):
			return task, nil
		case gerr == nil:
			last, silent = task, 0 // the peer answers: its task still runs
		case ctx.Err() == nil:
			if silent++; silent > s.resubscribes {
				if err == nil {
					err = errors.New("the stream showed the task's end")
				}
				return last, fmt.Errorf("delegate to %s: task %s: %w (last error: %w; then get task: %w)", peer.Name, remote, ErrNoFinalState, err, gerr)
			}
		}
		t := time.NewTimer(min(time.Duration(100<<min(round, 6))*time.Millisecond, 5*time.Second))
		select {
		case <-t.C:
			err = read(client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: remote}))
		case <-ctx.Done():
			t.Stop()
		}
	}
	if ctx.Err() != nil {
		// Our task ended first: the peer's must too, unless our agent is
		// only stopping and will follow the peer's task again at its start.
		if remote != "" && !errors.Is(context.Cause(ctx), tasks.ErrShutdown) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if t, cerr := client.CancelTask(cctx, &a2a.CancelTaskRequest{ID: remote}); cerr == nil {
				last = t
			} else if t, gerr := client.GetTask(cctx, &a2a.GetTaskRequest{ID: remote}); gerr == nil {
				last = t // not cancelable: it may have ended on its own
			}
			cancel()
		}
		return last, fmt.Errorf("delegate to %s: %w", peer.Name, ctx.Err())
	}
	if err == nil || errors.Is(err, errEndedEarly) { // a message, or nothing: no task to follow
		err = errors.New("the peer answered with no task")
	}
	return nil, fmt.Errorf("delegate to %s: %w", peer.Name, err)
}

// finalState reports whether a task in state s waits for nothing more
// from the peer: a terminal state, or one that needs its caller.
func finalState(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// terminal reports whether ev leaves the peer's task in a final state.
func terminal(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.Task:
		return finalState(e.Status.State)
	case *a2a.TaskStatusUpdateEvent:
		return finalState(e.Status.State)
	case *a2a.Message:
		return true
	}
	return false
}
