package delegation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/handoff-a2a/handoff/tasks"
)

// ErrNoFinalState means the peer's task could not be followed to an end:
// its stream kept breaking and resubscribing did not help.
var ErrNoFinalState = errors.New("the peer's task was not followed to its end")

// Sender sends a delegated message to a verified peer and follows the
// peer's task to its end: by stream, resubscribing when the stream breaks,
// then one GetTask for the whole final task.
type Sender struct {
	http         *http.Client
	resubscribes int
}

// NewSender returns a Sender. Its HTTP client has no overall timeout
// (streams are long: contexts bound every call), and it resubscribes a
// broken stream up to 5 times.
func NewSender() *Sender {
	return &Sender{http: &http.Client{}, resubscribes: 5}
}

// extensionHeader activates the envelope extension on every request.
type extensionHeader struct{ next http.RoundTripper }

func (e extensionHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Add("A2A-Extensions", EnvelopeExtension)
	return e.next.RoundTrip(r)
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
	hc := &http.Client{Transport: extensionHeader{next: next}, Jar: s.http.Jar}
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
// and will follow the peer's task again when it starts.
// Sending the same envelope again (same idempotency key) to a Handoff peer
// follows the task the first send started instead of starting another.
func (s *Sender) Delegate(ctx context.Context, peer PeerStatus, msg *a2a.Message, env *Envelope, progress func(a2a.Event)) (*a2a.Task, error) {
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
// subscribing, or with one GetTask when it has already ended. Like
// Delegate, it cancels the remote task when ctx ends first.
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

// follow reads events (when not nil) and then resubscribes to the remote
// task until it reaches a final state, then gets it whole.
func (s *Sender) follow(ctx context.Context, client *a2aclient.Client, peer PeerStatus, remote a2a.TaskID,
	events func(yield func(a2a.Event, error) bool), progress func(a2a.Event)) (*a2a.Task, error) {
	finished := false
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
				finished = true
				return nil
			}
		}
		return nil
	}
	var err error
	if events != nil {
		err = read(events)
	}
	limit, backoff := s.resubscribes, 0
	if events == nil { // the first subscribe is not a retry
		limit, backoff = limit+1, -1
	}
	for attempt := 0; !finished && ctx.Err() == nil && remote != "" && attempt < limit; attempt++ {
		if n := attempt + backoff; n >= 0 {
			t := time.NewTimer(time.Duration(100<<n) * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			if ctx.Err() != nil {
				break
			}
		}
		if err = read(client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: remote})); errors.Is(err, a2a.ErrUnsupportedOperation) {
			finished = true // the task ended while we were away
			err = nil
		}
	}
	if ctx.Err() != nil {
		// Our task ended first: the peer's must too, unless our agent is
		// only stopping and will follow the peer's task again at its start.
		if remote != "" && !errors.Is(context.Cause(ctx), tasks.ErrShutdown) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, _ = client.CancelTask(cctx, &a2a.CancelTaskRequest{ID: remote})
			cancel()
		}
		return nil, fmt.Errorf("delegate to %s: %w", peer.Name, ctx.Err())
	}
	if remote == "" {
		if err == nil {
			err = errors.New("the peer answered with no task")
		}
		return nil, fmt.Errorf("delegate to %s: %w", peer.Name, err)
	}
	if !finished {
		return nil, fmt.Errorf("delegate to %s: task %s: %w (last error: %v)", peer.Name, remote, ErrNoFinalState, err)
	}
	final, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: remote})
	if err != nil {
		return nil, fmt.Errorf("delegate to %s: get task %s: %w", peer.Name, remote, err)
	}
	return final, nil
}

// terminal reports whether ev leaves the peer's task in a final state.
func terminal(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.Task:
		return e.Status.State.Terminal() || e.Status.State == a2a.TaskStateInputRequired || e.Status.State == a2a.TaskStateAuthRequired
	case *a2a.TaskStatusUpdateEvent:
		return e.Status.State.Terminal() || e.Status.State == a2a.TaskStateInputRequired || e.Status.State == a2a.TaskStateAuthRequired
	case *a2a.Message:
		return true
	}
	return false
}
