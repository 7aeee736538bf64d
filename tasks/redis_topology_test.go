package tasks_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
)

// clusterPort is a free port whose cluster bus port (port+10000) is valid.
func clusterPort(tb testing.TB) int {
	for {
		if p := freePort(tb); p < 55000 {
			return p
		}
	}
}

// startCluster runs a Redis Cluster of three masters for tb and returns
// its store URL (one seed node, the others as addr parameters).
func startCluster(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	var nodes []string
	for range 3 {
		p := clusterPort(tb)
		startRedis(tb, p, "--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--dir", dir,
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", p)))
		nodes = append(nodes, fmt.Sprintf("127.0.0.1:%d", p))
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, nodes...), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n})
		waitFor(tb, 20*time.Second, "cluster state ok on "+n, func() bool {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		c.Close()
	}
	return fmt.Sprintf("redis://%s?addr=%s&addr=%s", nodes[0], nodes[1], nodes[2])
}

// TestRedisCluster runs the shared store suite, then two replicas' engines,
// on a Redis Cluster: an agent's keys share one hash slot, so its scripts,
// multi-key reads and Pub/Sub work there.
func TestRedisCluster(t *testing.T) {
	url := startCluster(t)
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleRedis(t, url) })

	t.Run("Replicas", func(t *testing.T) {
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
	})
}

func endsCanceled(ev a2a.Event) bool {
	s, ok := ev.(*a2a.TaskStatusUpdateEvent)
	return ok && s.Status.State == a2a.TaskStateCanceled
}

// TestRedisSentinel opens the store through a Sentinel URL: the store finds
// the master through the sentinel and writes there.
func TestRedisSentinel(t *testing.T) {
	master := startRedis(t, freePort(t))
	sport := freePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	masterAddr := strings.TrimSuffix(strings.TrimPrefix(master.url, "redis://"), "/0")
	host, port, _ := strings.Cut(masterAddr, ":")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "port %d\nbind 127.0.0.1\nsentinel monitor mymaster %s %s 1\n", sport, host, port), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis sentinel: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("redis://127.0.0.1:%d/0?master_name=mymaster", sport)
	var s *tasks.RedisStore
	waitFor(t, 20*time.Second, "the sentinel to name the master", func() bool {
		var err error
		s, err = tasks.OpenRedis(t.Context(), url, "sentinel-test")
		return err == nil
	})
	defer s.Close()
	owner := tasks.Owner{Principal: "p"}
	snap := newTask(owner, "t1", a2a.TaskStateWorking, 1)
	if err := s.Append(t.Context(), snap, []a2a.Event{snap.Task}); err != nil {
		t.Fatalf("append through the sentinel: %v", err)
	}
	if got, err := s.Get(t.Context(), owner, "t1"); err != nil || got.Version != 1 {
		t.Fatalf("get through the sentinel: %v, %v", got, err)
	}
	c := redisClient(t, master.url)
	if n, err := c.Exists(t.Context(), "handoff:{sentinel-test}:task:t1").Result(); err != nil || n != 1 {
		t.Fatalf("the task is not on the master: exists %d, %v", n, err)
	}
}
