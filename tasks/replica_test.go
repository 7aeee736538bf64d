package tasks_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// testLease keeps the takeover tests short: a dead replica's task ends
// within about 1.5 of it.
const testLease = 900 * time.Millisecond

// replicas starts n engines sharing one Redis namespace, each with its own
// store (connections) and executor, as n processes would.
func replicas(t *testing.T, n int, opts ...tasks.Option) ([]*tasks.Engine, []*scriptExec, []*redisstore.Store) {
	t.Helper()
	return replicasOn(t, redistest.ServerURL(t), n, opts...)
}

func replicasOn(t *testing.T, url string, n int, opts ...tasks.Option) ([]*tasks.Engine, []*scriptExec, []*redisstore.Store) {
	t.Helper()
	first, prefix := redistest.OpenStore(t, url)
	ns := strings.TrimSuffix(strings.TrimPrefix(prefix, "handoff:{"), "}:")
	var (
		es     []*tasks.Engine
		xs     []*scriptExec
		stores = []*redisstore.Store{first}
	)
	for i := range n {
		if i > 0 {
			s, err := redisstore.Open(t.Context(), url, ns)
			if err != nil {
				t.Fatal(err)
			}
			stores = append(stores, s)
		}
		x := &scriptExec{release: make(chan struct{})}
		e, err := tasks.NewEngine(t.Context(), stores[i], x, append([]tasks.Option{tasks.WithLeaseTTL(testLease)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		s := stores[i]
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			e.Shutdown(ctx)
			s.Close()
		})
		es, xs = append(es, e), append(xs, x)
	}
	return es, xs, stores
}

// startWaiting starts a task on e that works until x.release is closed.
func startWaiting(t *testing.T, e *tasks.Engine) *a2a.Task {
	t.Helper()
	req := send("wait")
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	res, err := e.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage = %T, want a task", res)
	}
	waitState(t, e, task.ID, a2a.TaskStateWorking)
	return task
}

// waitState polls GetTask on e until the task is in state want.
func waitState(t *testing.T, e *tasks.Engine, id a2a.TaskID, want a2a.TaskState) *a2a.Task {
	t.Helper()
	var got *a2a.Task
	redistest.WaitFor(t, 10*time.Second, "task "+string(id)+" "+string(want), func() bool {
		var err error
		got, err = e.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		return err == nil && got.Status.State == want
	})
	return got
}

// TestReplicasStreamAcross: a task runs on A; B's start and sweeps leave it
// alone while A renews its lease; a subscriber on B gets every event A
// writes, in order, once.
func TestReplicasStreamAcross(t *testing.T) {
	es, xs, stores := replicas(t, 2)
	a, b := es[0], es[1]
	task := startWaiting(t, a)

	sub := subscribed(t, b, task.ID)
	// Another replica starting now recovers nothing: the task's lease is alive.
	x := &scriptExec{release: make(chan struct{})}
	if _, err := tasks.NewEngine(t.Context(), stores[1], x, tasks.WithLeaseTTL(testLease)); err != nil {
		t.Fatal(err)
	}
	// Several lease periods pass: A's renewals keep B's sweeps off the task.
	time.Sleep(2 * testLease)
	if got := waitState(t, b, task.ID, a2a.TaskStateWorking); got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("task on B after %s = %s", 2*testLease, got.Status.State)
	}
	close(xs[0].release)

	got := <-sub
	if got.err != nil {
		t.Fatalf("subscribe on B: %v", got.err)
	}
	evs := got.evs
	stored, err := stores[0].Events(t.Context(), tasks.Owner{Principal: tasks.AnonymousPrincipal}, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The subscription opens with the task as it stood, then every later event.
	if len(evs) < 2 {
		t.Fatalf("subscription on B got %s", kinds(evs))
	}
	first, ok := evs[0].(*a2a.Task)
	if !ok || first.Status.State != a2a.TaskStateWorking {
		t.Fatalf("first event on B = %T, want the working task", evs[0])
	}
	var want []a2a.Event
	for _, ev := range stored[len(stored)-(len(evs)-1):] {
		want = append(want, ev.Event)
	}
	if got, w := kinds(evs[1:]), kinds(want); got != w {
		t.Fatalf("events on B after the task = %s, want the log's last ones %s", got, w)
	}
	if got, w := kinds(evs[1:]), "artifact,status:"+string(a2a.TaskStateCompleted); got != w {
		t.Fatalf("events on B after the task = %s, want %s", got, w)
	}
	if got := waitState(t, b, task.ID, a2a.TaskStateCompleted); len(got.Artifacts) != 1 {
		t.Fatalf("completed task on B has %d artifacts, want 1", len(got.Artifacts))
	}
}

// TestReplicasCancelAcross: a cancel on B reaches the execution on A, which
// stops; the task ends canceled once.
func TestReplicasCancelAcross(t *testing.T) {
	es, _, stores := replicas(t, 2, tasks.WithMaxConcurrent(1))
	a, b := es[0], es[1]
	task := startWaiting(t, a)
	got, err := b.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask on B: %v", err)
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask on B = %s, want canceled", got.Status.State)
	}
	waitState(t, a, task.ID, a2a.TaskStateCanceled)
	stored, err := stores[0].Events(t.Context(), tasks.Owner{Principal: tasks.AnonymousPrincipal}, task.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	k, c := kinds(eventsOf(stored)), string(a2a.TaskStateCanceled)
	if strings.Count(k, c) != 1 || !strings.HasSuffix(k, c) {
		t.Fatalf("log after the cancel = %s, want one canceled at the end", k)
	}
	// A's execution stopped: its only slot is free again.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := a.SendMessage(ctx, send("hello")); err != nil {
		t.Fatalf("A after the cancel: %v (its execution still holds the slot)", err)
	}
	if _, err := b.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID}); err == nil {
		t.Fatalf("second CancelTask succeeded, want TaskNotCancelable")
	}
}

// TestReplicasTakeOver: the replica running a task loses Redis for good (as
// if killed); another replica fails the task within the lease bound, and
// its subscriber sees that.
func TestReplicasTakeOver(t *testing.T) {
	es, _, stores := replicas(t, 2)
	a, b := es[0], es[1]
	task := startWaiting(t, a)
	sub := subscribed(t, b, task.ID)
	dead := time.Now()
	stores[0].Close() // A can neither renew nor write
	got := waitState(t, b, task.ID, a2a.TaskStateFailed)
	took := time.Since(dead)
	if bound := testLease*3/2 + time.Second; took > bound {
		t.Fatalf("task failed %s after its replica died, want within %s", took, bound)
	}
	if !strings.Contains(textOf(got.Status.Message), "replica running this task stopped") {
		t.Fatalf("failed status = %q, want the replica's death named", textOf(got.Status.Message))
	}
	evs := (<-sub).evs
	if k, w := kinds(evs), "task:"+string(a2a.TaskStateWorking)+",status:"+string(a2a.TaskStateFailed); k != w {
		t.Fatalf("subscriber on B got %s, want %s", k, w)
	}
}

// TestReplicasContinueAcross: a task that asked for input on A takes the
// answer on B, which runs it from the snapshot A stored.
func TestReplicasContinueAcross(t *testing.T) {
	es, _, _ := replicas(t, 2)
	a, b := es[0], es[1]
	res, err := a.SendMessage(t.Context(), send("ask"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("task = %s, want input-required", task.Status.State)
	}
	answer := send("answer")
	answer.Message.TaskID = task.ID
	res, err = b.SendMessage(t.Context(), answer)
	if err != nil {
		t.Fatalf("answer on B: %v", err)
	}
	if got := res.(*a2a.Task); got.Status.State != a2a.TaskStateCompleted || len(got.History) < 3 {
		t.Fatalf("answered task = %s with %d messages, want completed with 3", got.Status.State, len(got.History))
	}
	waitState(t, a, task.ID, a2a.TaskStateCompleted)
}

func eventsOf(stored []tasks.Event) []a2a.Event {
	out := make([]a2a.Event, len(stored))
	for i, e := range stored {
		out[i] = e.Event
	}
	return out
}

// TestReplicasWrittenElsewhere: another replica ends a task this one runs
// (as a cancel does when this replica does not answer in time); the
// execution's next write is refused, and its blocking caller and
// subscribers get the task as the other replica stored it.
func TestReplicasWrittenElsewhere(t *testing.T) {
	es, xs, stores := replicas(t, 1)
	a := es[0]
	type result struct {
		res a2a.SendMessageResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := a.SendMessage(t.Context(), send("wait"))
		done <- result{res, err}
	}()
	var id a2a.TaskID
	redistest.WaitFor(t, 10*time.Second, "the task to work", func() bool {
		page, err := stores[0].List(t.Context(), tasks.ListQuery{Owner: tasks.Owner{Principal: tasks.AnonymousPrincipal}, PageSize: 10})
		if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Task.Status.State != a2a.TaskStateWorking {
			return false
		}
		id = page.Tasks[0].Task.ID
		return true
	})
	sub := subscribed(t, a, id)
	// Another writer (a replica's fallback cancel) stores canceled.
	owner := tasks.Owner{Principal: tasks.AnonymousPrincipal}
	cur, err := stores[0].Get(t.Context(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	canceled := *cur.Task
	canceled.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled}
	ev := a2a.NewStatusUpdateEvent(cur.Task, a2a.TaskStateCanceled, nil)
	if err := stores[0].Append(t.Context(), &tasks.Snapshot{Task: &canceled, Owner: owner, Version: cur.Version + 1, Updated: time.Now()}, []a2a.Event{ev}); err != nil {
		t.Fatal(err)
	}
	close(xs[0].release) // the execution goes on and writes: refused

	r := <-done
	if r.err != nil {
		t.Fatalf("blocking send: %v", r.err)
	}
	if got := r.res.(*a2a.Task); got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("blocking send answered %s, want the canceled task the other writer stored", got.Status.State)
	}
	evs := (<-sub).evs
	if len(evs) == 0 || !endsCanceled(evs[len(evs)-1]) {
		t.Fatalf("subscription got %s, want it to end canceled", kinds(evs))
	}
	if got := waitState(t, a, id, a2a.TaskStateCanceled); got.Status.State != a2a.TaskStateCanceled {
		t.Fatal(got.Status.State)
	}
}

// subscription is what a subscriber received: its events, and the error
// that ended it, if one did.
type subscription struct {
	evs []a2a.Event
	err error
}

// subscribed subscribes to task id on e and returns once the subscription
// holds its first event (the task as it is), so that what the test does
// next happens while the subscription is open; the channel gets what the
// subscription received when it ends.
func subscribed(t *testing.T, e *tasks.Engine, id a2a.TaskID) <-chan subscription {
	t.Helper()
	open := make(chan struct{})
	out := make(chan subscription, 1)
	go func() {
		var s subscription
		for ev, err := range e.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				s.err = err
				break
			}
			if s.evs = append(s.evs, ev); len(s.evs) == 1 {
				close(open)
			}
		}
		if len(s.evs) == 0 {
			close(open)
		}
		out <- s
	}()
	select {
	case <-open:
	case <-time.After(10 * time.Second):
		t.Fatalf("subscription to task %s never opened", id)
	}
	return out
}

// TestReplicasOnCluster runs two replicas' engines on a Redis Cluster: an
// agent's keys share one hash slot, so its scripts, multi-key reads and
// Pub/Sub work there.
func TestReplicasOnCluster(t *testing.T) {
	url := redistest.StartCluster(t)
	es, _, _ := replicasOn(t, url, 2)
	a, b := es[0], es[1]
	task := startWaiting(t, a)
	sub := subscribed(t, b, task.ID)
	got, err := b.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask on B of A's task: %v, %v", got, err)
	}
	evs := (<-sub).evs
	if len(evs) < 2 || !endsCanceled(evs[len(evs)-1]) {
		t.Fatalf("subscription on B = %s, want it to end canceled", kinds(evs))
	}
}

func endsCanceled(ev a2a.Event) bool {
	s, ok := ev.(*a2a.TaskStatusUpdateEvent)
	return ok && s.Status.State == a2a.TaskStateCanceled
}
