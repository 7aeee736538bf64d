package delegation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/delegation"
)

// How the fake peer answers SubscribeToTask.
const (
	// subscribeJSONError: on a finished task, HTTP 200 with an
	// application/json body carrying JSON-RPC error -32004, as the JS SDK
	// 1.x does; on a running one, the task then nothing (a stream that ends).
	subscribeJSONError = "JSON-RPC error in a JSON body"
	// subscribeEmpty: an SSE stream that ends without any event.
	subscribeEmpty = "empty stream"
	// subscribeClose: the connection closed before any response.
	subscribeClose = "closed connection"
	// subscribeSSEError: the -32004 error as an SSE event.
	subscribeSSEError = "JSON-RPC error as an SSE event"
	// subscribeHang: a stream that stays open without events until the
	// client goes.
	subscribeHang = "stream that hangs"
	// subscribeLost: the peer lost the task (an in-memory store, restarted):
	// subscribe and GetTask both answer JSON-RPC -32001 in a JSON body.
	subscribeLost = "task lost"
)

// fakePeer is a JSON-RPC A2A peer with one task, whose state the test
// sets, answering SubscribeToTask as mode says: a real server on
// 127.0.0.1, speaking the wire as the JS SDK does.
type fakePeer struct {
	t    *testing.T
	mode string
	srv  *httptest.Server

	mu         sync.Mutex
	state      a2a.TaskState
	message    string // the status message's text
	subscribes int
	gets       int
	cancels    int
	// endAfter, when above zero, ends the task completed on that subscribe.
	endAfter int
}

const fakeTask = "remote-1"

func startFakePeer(t *testing.T, mode string, state a2a.TaskState) *fakePeer {
	t.Helper()
	p := &fakePeer{t: t, mode: mode, state: state}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePeer) status() delegation.PeerStatus {
	return delegation.PeerStatus{Name: "payments", BaseURL: p.srv.URL, State: delegation.StateVerified,
		Card: &a2a.AgentCard{Name: "Payments", SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(p.srv.URL+"/a2a/jsonrpc", a2a.TransportProtocolJSONRPC)}}}
}

func (p *fakePeer) task() *a2a.Task {
	st := a2a.TaskStatus{State: p.state}
	if p.message != "" {
		st.Message = a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(p.message))
	}
	return &a2a.Task{ID: fakeTask, ContextID: "ctx-1", Status: st}
}

func (p *fakePeer) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	reply := func(result any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
	lost, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{
		"code": -32001, "message": fmt.Sprintf("Task %s not found", fakeTask)}})
	if p.mode == subscribeLost && (req.Method == "GetTask" || req.Method == "SubscribeToTask") {
		p.gets++
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(lost)
		return
	}
	switch req.Method {
	case "GetTask":
		p.gets++
		reply(p.task())
	case "CancelTask":
		p.cancels++
		if !p.state.Terminal() {
			p.state, p.message = a2a.TaskStateCanceled, "refund canceled"
		}
		reply(p.task())
	case "SubscribeToTask":
		p.subscribes++
		if p.endAfter > 0 && p.subscribes >= p.endAfter {
			p.state = a2a.TaskStateCompleted
		}
		p.subscribe(w, r, req.ID)
	default:
		http.Error(w, "unexpected method "+req.Method, http.StatusBadRequest)
	}
}

func (p *fakePeer) subscribe(w http.ResponseWriter, r *http.Request, id any) {
	rpcErr, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32004, "message": fmt.Sprintf("Task %s is in a terminal state and cannot be subscribed to.", fakeTask)}})
	switch mode := p.mode; {
	case mode == subscribeJSONError && p.state.Terminal():
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(rpcErr)
	case mode == subscribeSSEError && p.state.Terminal():
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", rpcErr)
	case mode == subscribeClose:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			p.t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	case mode == subscribeHang:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		p.mu.Unlock()
		<-r.Context().Done() // the client went
		p.mu.Lock()
	default: // empty: a stream that ends with no event
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
}

func (p *fakePeer) counts() (subscribes, gets, cancels int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subscribes, p.gets, p.cancels
}

// TestFollowEndsInThePeersFinalState: after a restart, the peer's task has
// ended; however the peer answers the subscribe, Follow returns the
// peer's own final task, completed or failed, with its status message.
func TestFollowEndsInThePeersFinalState(t *testing.T) {
	for _, mode := range []string{subscribeJSONError, subscribeEmpty, subscribeClose, subscribeSSEError} {
		for _, end := range []a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateFailed} {
			t.Run(mode+"/"+string(end), func(t *testing.T) {
				p := startFakePeer(t, mode, end)
				p.message = "card declined"
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				final, err := delegation.NewSender().Follow(ctx, p.status(), fakeTask, nil)
				if err != nil {
					t.Fatalf("Follow: %v", err)
				}
				if final.Status.State != end || final.Status.Message == nil || final.Status.Message.Parts[0].Text() != "card declined" {
					t.Fatalf("Follow = %s %v, want the peer's %s with its message", final.Status.State, final.Status.Message, end)
				}
				if _, _, cancels := p.counts(); cancels != 0 {
					t.Fatalf("a finished task was canceled %d times", cancels)
				}
			})
		}
	}
}

// TestFollowWhileThePeerWorks: the peer's streams end while its task
// still works; Follow asks, resubscribes, and ends with the task's end.
func TestFollowWhileThePeerWorks(t *testing.T) {
	for _, mode := range []string{subscribeEmpty, subscribeClose} {
		t.Run(mode, func(t *testing.T) {
			p := startFakePeer(t, mode, a2a.TaskStateWorking)
			p.endAfter = 4
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			final, err := delegation.NewSender().Follow(ctx, p.status(), fakeTask, nil)
			if err != nil || final.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("Follow = %v, %v; want completed", final, err)
			}
			if subs, gets, _ := p.counts(); subs < 4 || gets < 4 {
				t.Fatalf("%d subscribes and %d GetTasks, want at least 4 each", subs, gets)
			}
		})
	}
}

// TestFollowUnreachablePeer: a peer that answers nothing ends the follow
// with ErrNoFinalState and the errors it gave.
func TestFollowUnreachablePeer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	peer := delegation.PeerStatus{Name: "payments", State: delegation.StateVerified, Card: &a2a.AgentCard{
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)}}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := delegation.NewSender().Follow(ctx, peer, fakeTask, nil)
	if !errors.Is(err, delegation.ErrNoFinalState) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Follow = %v, want ErrNoFinalState naming the 503", err)
	}
}

// TestFollowLostTask: a peer that lost the task says so, in a JSON body
// to the subscribe too; the follow ends with ErrNoFinalState and the
// peer's own error, not an empty stream's silence.
func TestFollowLostTask(t *testing.T) {
	p := startFakePeer(t, subscribeLost, a2a.TaskStateWorking)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := delegation.NewSender().Follow(ctx, p.status(), fakeTask, nil)
	if !errors.Is(err, delegation.ErrNoFinalState) || !errors.Is(err, a2a.ErrTaskNotFound) ||
		strings.Count(err.Error(), "Task remote-1 not found") != 2 {
		t.Fatalf("Follow = %v, want ErrNoFinalState with the peer's not-found from the subscribe and the GetTask", err)
	}
}

// TestFollowTimeout: the deadline passes while the peer works; the peer's
// task is canceled and returned as it then stands, with the error.
func TestFollowTimeout(t *testing.T) {
	p := startFakePeer(t, subscribeHang, a2a.TaskStateWorking)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	last, err := delegation.NewSender().Follow(ctx, p.status(), fakeTask, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Follow error = %v, want the deadline", err)
	}
	if last == nil || last.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("Follow returned %v with the error, want the peer's task canceled", last)
	}
	if _, _, cancels := p.counts(); cancels != 1 {
		t.Fatalf("%d cancels, want 1", cancels)
	}
}

// TestDelegateRefusesDeadline: an envelope without a deadline, or past
// it, is not sent.
func TestDelegateRefusesDeadline(t *testing.T) {
	p := startFakePeer(t, subscribeEmpty, a2a.TaskStateWorking)
	for _, tt := range []struct {
		name     string
		deadline time.Time
		want     error
	}{
		{"none", time.Time{}, delegation.ErrMalformedEnvelope},
		{"past", time.Now().Add(-time.Second), delegation.ErrDeadlinePassed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := &delegation.Envelope{Actor: "alice", Deadline: tt.deadline}
			_, err := delegation.NewSender().Delegate(t.Context(), p.status(), a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("refund")), env, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Delegate = %v, want %v", err, tt.want)
			}
		})
	}
}
