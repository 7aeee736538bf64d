package redisstore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff/internal/redistest"
	"github.com/handoff-a2a/handoff/internal/storetest"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// TestRedisCluster runs the shared store suite on a Redis Cluster: an
// agent's keys share one hash slot, so its scripts and multi-key reads work
// there (the engine's TestReplicasOnCluster runs replicas on one).
func TestRedisCluster(t *testing.T) {
	url := redistest.StartCluster(t)
	storetest.Run(t, func(t *testing.T) tasks.Store { return openCorruptibleRedis(t, url) })
}

// TestRedisSentinel opens the store through a Sentinel URL: the store finds
// the master through the sentinel and writes there.
func TestRedisSentinel(t *testing.T) {
	master := redistest.Start(t, redistest.FreePort(t))
	sport := redistest.FreePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	masterAddr := strings.TrimSuffix(strings.TrimPrefix(master.URL, "redis://"), "/0")
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
	var s *redisstore.Store
	redistest.WaitFor(t, 20*time.Second, "the sentinel to name the master", func() bool {
		var err error
		s, err = redisstore.Open(t.Context(), url, "sentinel-test")
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
	c := redistest.ClientFor(t, master.URL)
	if n, err := c.Exists(t.Context(), "handoff:{sentinel-test}:task:t1").Result(); err != nil || n != 1 {
		t.Fatalf("the task is not on the master: exists %d, %v", n, err)
	}
}
