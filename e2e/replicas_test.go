package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
)

// machineRedis is the Redis the replica tests share, each in a namespace of
// its own; none of them needs to stop it.
const machineRedis = "redis://127.0.0.1:6379/0"

// takeoverBound is how soon after its replica dies a running task must end:
// the lease outlives its last renewal by one TTL, and the sweeps that find
// it expired run every TTL/2; the rest is slack for a loaded machine.
const takeoverBound = tasks.DefaultLeaseTTL*3/2 + 3*time.Second

// startReplicas runs n `handoff serve` processes of the conformance agent on
// one Redis namespace, deleted when the test ends.
func startReplicas(t *testing.T, n int) []*agent {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second); err != nil {
		t.Fatalf("the replica tests need the machine's Redis on 127.0.0.1:6379: %v", err)
	} else {
		c.Close()
	}
	b := make([]byte, 8)
	rand.Read(b)
	ns := "e2e-" + hex.EncodeToString(b)
	t.Cleanup(func() { deleteNamespace(t, ns) }) // after the replicas stop: cleanups run last first
	store := map[string]any{"kind": "redis", "url": machineRedis, "namespace": ns}
	out := make([]*agent, n)
	for i := range out {
		out[i] = startAgent(t, agentConfig{store: store})
	}
	return out
}

func deleteNamespace(t *testing.T, ns string) {
	o, err := redis.ParseURL(machineRedis)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	it := c.Scan(ctx, 0, "handoff:{"+ns+"}:*", 500).Iterator()
	for it.Next(ctx) {
		c.Del(ctx, it.Val())
	}
	if err := it.Err(); err != nil {
		t.Errorf("delete the keys of namespace %s: %v", ns, err)
	}
}

// startLong starts a test-resubscribe-message-id task (working for 10 s)
// through a stream on c and returns the stream, read up to working.
func startLong(t *testing.T, c *a2aclient.Client, name string) (*stream, a2a.TaskID) {
	t.Helper()
	s := openStream(t, name, c.SendStreamingMessage(callCtx(t), &a2a.SendMessageRequest{
		Message: userMessage(uniqueID("test-resubscribe-message-id"), name)}))
	first := wantTaskEvent(t, name+" event 0", s.read(), "", a2a.TaskStateSubmitted)
	s.readUntilWorking()
	return s, first.ID
}

// after returns the events of a stream that follow the first working state.
func afterWorking(evs []a2a.Event) []a2a.Event {
	for i, ev := range evs {
		switch e := ev.(type) {
		case *a2a.Task:
			if e.Status.State == a2a.TaskStateWorking {
				return evs[i+1:]
			}
		case *a2a.TaskStatusUpdateEvent:
			if e.Status.State == a2a.TaskStateWorking {
				return evs[i+1:]
			}
		}
	}
	return nil
}

// TestReplicasSendStreamCancel: three replicas on one Redis. A task sent on
// A is streamed on B and canceled on C; another, sent on A and followed on
// B, completes. Each subscriber on B gets the task as it stood, then
// exactly the events A's stream got after that point, in order, once.
func TestReplicasSendStreamCancel(t *testing.T) {
	rs := startReplicas(t, 3)
	a, b, c := jsonrpcClient(t, rs[0]), jsonrpcClient(t, rs[1]), jsonrpcClient(t, rs[2])

	onA, canceled := startLong(t, a, "stream on A of the task canceled on C")
	doneOnA, completed := startLong(t, a, "stream on A of the task that completes")
	subCanceled := openStream(t, "subscription on B (canceled)", b.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: canceled}))
	subCompleted := openStream(t, "subscription on B (completed)", b.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: completed}))
	wantTaskEvent(t, "subscription on B (canceled) event 0", subCanceled.read(), canceled, a2a.TaskStateWorking)
	wantTaskEvent(t, "subscription on B (completed) event 0", subCompleted.read(), completed, a2a.TaskStateWorking)

	got, err := c.CancelTask(callCtx(t), &a2a.CancelTaskRequest{ID: canceled})
	if err != nil {
		t.Fatalf("CancelTask on C of a task running on A: %v", err)
	}
	wantState(t, "CancelTask on C", got, a2a.TaskStateCanceled)

	for _, tc := range []struct {
		name     string
		id       a2a.TaskID
		onA, onB *stream
		want     a2a.TaskState
	}{
		{"canceled on C", canceled, onA, subCanceled, a2a.TaskStateCanceled},
		{"completed on A", completed, doneOnA, subCompleted, a2a.TaskStateCompleted},
	} {
		fromA := afterWorking(tc.onA.readToEnd())
		fromB := tc.onB.readToEnd()[1:]
		if len(fromA) == 0 {
			t.Fatalf("%s: A's stream ended without events after working", tc.name)
		}
		if ga, gb := eventsJSON(t, fromA), eventsJSON(t, fromB); strings.Join(ga, "\n") != strings.Join(gb, "\n") {
			t.Fatalf("%s: B's subscription after the task:\n%s\nwant what A's stream got:\n%s", tc.name, strings.Join(gb, "\n"), strings.Join(ga, "\n"))
		}
		last := fromB[len(fromB)-1]
		wantStatusEvent(t, tc.name+": last event on B", last, tc.id, tc.want)
		for i, r := range []*a2aclient.Client{a, b, c} {
			wantState(t, fmt.Sprintf("%s: GetTask on replica %d", tc.name, i), getTask(t, r, tc.id), tc.want)
		}
	}
	// Canceled once: a second cancel, on any replica, is refused.
	if _, err := b.CancelTask(callCtx(t), &a2a.CancelTaskRequest{ID: canceled}); err == nil {
		t.Fatalf("a second CancelTask of the canceled task succeeded")
	}
}

// TestReplicasKill9: kill -9 of the replica running a long task; another
// replica ends it failed, saying so, within the lease bound.
func TestReplicasKill9(t *testing.T) {
	rs := startReplicas(t, 3)
	a, b := jsonrpcClient(t, rs[0]), jsonrpcClient(t, rs[1])
	s, id := startLong(t, a, "stream on A of the task at the kill")
	rs[0].kill9()
	killed := time.Now()
	s.close()

	var task *a2a.Task
	for {
		task = getTask(t, b, id)
		if task.Status.State != a2a.TaskStateWorking {
			break
		}
		if time.Since(killed) > takeoverBound {
			t.Fatalf("task still working %s after its replica was killed, want it taken over within %s", time.Since(killed), takeoverBound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(killed)
	wantState(t, "task of the killed replica", task, a2a.TaskStateFailed)
	if msg := statusText(task.Status); !strings.Contains(msg, "replica") {
		t.Fatalf("failed status message = %q, want it to say its replica stopped", msg)
	}
	t.Logf("taken over %s after kill -9 (lease TTL %s)", took.Round(10*time.Millisecond), tasks.DefaultLeaseTTL)
	if _, err := collect(b.SubscribeToTask(callCtx(t), &a2a.SubscribeToTaskRequest{ID: id})); err == nil {
		t.Fatalf("SubscribeToTask of the failed task succeeded, want an error (the task is finished)")
	}
}

// TestReplicasHundredTasks: 100 concurrent blocking sends spread over three
// replicas; every replica then lists exactly those 100, each in the state
// its send returned.
func TestReplicasHundredTasks(t *testing.T) {
	rs := startReplicas(t, 3)
	clients := []*a2aclient.Client{jsonrpcClient(t, rs[0]), jsonrpcClient(t, rs[1]), jsonrpcClient(t, rs[2])}
	kinds := []struct {
		prefix string
		state  a2a.TaskState
	}{
		{"tck-complete-task", a2a.TaskStateCompleted},
		{"tck-reject-task", a2a.TaskStateRejected},
		{"tck-input-required", a2a.TaskStateInputRequired},
		{"tck-artifact-text", a2a.TaskStateCompleted},
	}
	const n = 100
	var (
		mu   sync.Mutex
		want = make(map[a2a.TaskID]a2a.TaskState, n)
		wg   sync.WaitGroup
		errs = make(chan error, n)
	)
	for i := range n {
		k := kinds[i%len(kinds)]
		c := clients[i%len(clients)]
		wg.Go(func() {
			res, err := c.SendMessage(callCtx(t), &a2a.SendMessageRequest{Message: userMessage(uniqueID(k.prefix), k.prefix)})
			if err != nil {
				errs <- fmt.Errorf("send %d (%s): %w", i, k.prefix, err)
				return
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != k.state {
				errs <- fmt.Errorf("send %d (%s) = %T %v, want a task in %s", i, k.prefix, res, res, k.state)
				return
			}
			mu.Lock()
			want[task.ID] = k.state
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for i, c := range clients {
		list, err := c.ListTasks(callCtx(t), &a2a.ListTasksRequest{PageSize: 100})
		if err != nil {
			t.Fatalf("ListTasks on replica %d: %v", i, err)
		}
		if list.TotalSize != n || len(list.Tasks) != n || list.NextPageToken != "" {
			t.Fatalf("ListTasks on replica %d: total %d, %d tasks, next page %q; want exactly %d", i, list.TotalSize, len(list.Tasks), list.NextPageToken, n)
		}
		for _, task := range list.Tasks {
			if w, ok := want[task.ID]; !ok || task.Status.State != w {
				t.Fatalf("ListTasks on replica %d: task %s in %s, want %s (known: %v)", i, task.ID, task.Status.State, w, ok)
			}
		}
	}
}

// redisProcess is a redis-server of one test, with AOF persistence
// (appendfsync always) in its own directory, so it can crash and come back
// with every acknowledged write.
type redisProcess struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedisProcess(t *testing.T) *redisProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &redisProcess{t: t, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.kill)
	return r
}

func (r *redisProcess) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisProcess) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server (install it: apt-get install redis-server): %v", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	o, _ := redis.ParseURL(r.url())
	c := redis.NewClient(o)
	defer c.Close()
	deadline := time.Now().Add(readyTimeout)
	for c.Ping(r.t.Context()).Err() != nil {
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on port %d did not answer within %s", r.port, readyTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (r *redisProcess) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// readyz returns the status of a replica's readiness endpoint.
func readyz(t *testing.T, a *agent) int {
	status, _, err := httpGet(t.Context(), a.base+"/readyz")
	if err != nil {
		return 0
	}
	return status
}

// TestReplicasRedisRestart: Redis crashes under two replicas and comes
// back from its append-only file. During the outage requests fail at once
// with a clear error and /readyz answers 503; afterwards every acknowledged
// task is there, on both replicas, and new ones run.
func TestReplicasRedisRestart(t *testing.T) {
	srv := startRedisProcess(t)
	store := map[string]any{"kind": "redis", "url": srv.url(), "namespace": "restart"}
	rs := []*agent{startAgent(t, agentConfig{store: store}), startAgent(t, agentConfig{store: store})}
	clients := []*a2aclient.Client{jsonrpcClient(t, rs[0]), jsonrpcClient(t, rs[1])}
	var acked []a2a.TaskID
	before := map[a2a.TaskID]string{}
	for i := range 10 {
		task := sendTask(t, clients[i%2], &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-artifact-text"), "before the crash")})
		acked = append(acked, task.ID)
		before[task.ID] = asJSON(t, getTask(t, clients[(i+1)%2], task.ID))
	}

	srv.kill()
	for i, c := range clients {
		start := time.Now()
		_, err := c.SendMessage(callCtx(t), &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-complete-task"), "during the outage")})
		if err == nil || !strings.Contains(err.Error(), "store") {
			t.Fatalf("send on replica %d with Redis down: %v, want an error naming the store", i, err)
		}
		t.Logf("send on replica %d with Redis down, after %s: %v", i, time.Since(start).Round(time.Millisecond), err)
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("send on replica %d with Redis down failed after %s, want it to fail fast", i, took)
		}
		if status := readyz(t, rs[i]); status != http.StatusServiceUnavailable {
			t.Fatalf("/readyz of replica %d with Redis down = %d, want 503", i, status)
		}
	}

	srv.start()
	for i, a := range rs {
		deadline := time.Now().Add(readyTimeout)
		for readyz(t, a) != http.StatusOK {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d not ready %s after Redis came back", i, readyTimeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i, c := range clients {
		for _, id := range acked {
			if got := asJSON(t, getTask(t, c, id)); got != before[id] {
				t.Fatalf("task %s on replica %d after the restart:\n got %s\nwant %s", id, i, got, before[id])
			}
		}
		wantState(t, fmt.Sprintf("send on replica %d after the restart", i),
			sendTask(t, c, &a2a.SendMessageRequest{Message: userMessage(uniqueID("tck-complete-task"), "after")}), a2a.TaskStateCompleted)
	}
}

// TestReplicasPushKill9: the webhook is down while two of three replicas
// are killed -9, whichever of them was retrying the task's deliveries; once
// the webhook is back, the surviving replica delivers every event of the
// task, in order, after claiming the dead replica's job (or keeping its own).
func TestReplicasPushKill9(t *testing.T) {
	hookAddr := freeAddr(t) // nothing listens there yet: the receiver is down
	hook := "http://" + hookAddr + "/hook"
	b := make([]byte, 8)
	rand.Read(b)
	ns := "e2e-push-" + hex.EncodeToString(b)
	t.Cleanup(func() { deleteNamespace(t, ns) })
	cfg := agentConfig{pushRetryDelay: "20ms", pushMaxAttempts: 100000,
		store: map[string]any{"kind": "redis", "url": machineRedis, "namespace": ns}}
	rs := []*agent{startAgent(t, cfg), startAgent(t, cfg), startAgent(t, cfg)}
	task := sendTask(t, jsonrpcClient(t, rs[0]), &a2a.SendMessageRequest{
		Message: userMessage(uniqueID("tck-stream-001"), "push me"),
		Config:  &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: hook, Token: "e2e-token-123"}},
	})
	wantState(t, "pushed task", task, a2a.TaskStateCompleted)
	rs[0].kill9()
	rs[1].kill9()
	killed := time.Now()

	survivor := rs[2]
	// Each e2e replica has its own signing key: the survivor signs what it delivers.
	r := startPushReceiver(t, hookAddr, survivor.base, task.ID)
	r.wantEvents(t, true, push.DefaultClaimIdle+15*time.Second, func() string {
		return fmt.Sprintf("queue: %s; survivor's log:\n%s", queueState(t, ns, task.ID), survivor.stderr.String())
	})
	t.Logf("all events delivered %s after the kills (claim idle %s)", time.Since(killed).Round(10*time.Millisecond), push.DefaultClaimIdle)
}

// queueState describes the shared push queue of a namespace, for a failure.
func queueState(t *testing.T, ns string, task a2a.TaskID) string {
	o, _ := redis.ParseURL(machineRedis)
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	prefix := "handoff:{" + ns + "}:"
	pending, perr := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: prefix + "pushq", Group: "deliver", Start: "-", End: "+", Count: 100}).Result()
	entries, xerr := c.XRange(ctx, prefix+"pushq", "-", "+").Result()
	lock, _ := c.Get(ctx, prefix+"pushlock:"+string(task)).Result()
	ttl, _ := c.PTTL(ctx, prefix+"pushlock:"+string(task)).Result()
	state, _ := c.HGetAll(ctx, prefix+"push:"+string(task)).Result()
	return fmt.Sprintf("entries %v (%v), pending %+v (%v), lock %q ttl %s, delivery state %v", entries, xerr, pending, perr, lock, ttl, state)
}
