package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/tasks/redisstore"
)

// ServerURL is the machine's Redis on 127.0.0.1:6379 when it answers,
// otherwise one started for tb.
func ServerURL(tb testing.TB) string {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:6379", 200*time.Millisecond); err == nil {
		c.Close()
		return "redis://127.0.0.1:6379/0"
	}
	return Start(tb, FreePort(tb)).URL
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on.
func FreePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Server is a redis-server process of one test, without persistence
// unless its arguments ask for it.
type Server struct {
	// URL is the server's store URL.
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs redis-server on port for tb, with args after the defaults
// (no persistence), and waits until it answers; it is killed when tb ends.
func Start(tb testing.TB, port int, args ...string) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("127.0.0.1:6379 does not answer and redis-server is not in PATH: install it (apt-get install redis-server); CI installs it")
	}
	args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, args...)
	cmd := exec.Command(bin, args...) // later arguments win
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	s := &Server{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	tb.Cleanup(s.Stop)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	WaitFor(tb, 10*time.Second, "redis-server to answer", func() bool {
		select {
		case <-s.done:
			tb.Fatalf("redis-server on port %d exited", port)
		default:
		}
		return c.Ping(context.Background()).Err() == nil
	})
	return s
}

// Stop kills the server and waits for it to exit; stopping twice is fine.
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	<-s.done
}

// WaitFor polls cond until it holds, failing tb after max.
func WaitFor(tb testing.TB, max time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(max)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", max, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// OpenStore opens a store in a namespace of its own, whose keys are
// deleted when tb ends.
func OpenStore(tb testing.TB, url string, opts ...redisstore.Option) (*redisstore.Store, string) {
	tb.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	ns := "test-" + hex.EncodeToString(b)
	s, err := redisstore.Open(context.Background(), url, ns, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		s.Close()
		deleteKeys(tb, ClientFor(tb, url), "handoff:{"+ns+"}:*")
	})
	return s, "handoff:{" + ns + "}:"
}

// ClientFor is a client of its own for a store URL: one server, or a
// Cluster when the URL lists seed nodes (addr parameters).
func ClientFor(tb testing.TB, url string) redis.UniversalClient {
	var c redis.UniversalClient
	if strings.Contains(url, "addr=") {
		o, err := redis.ParseClusterURL(url)
		if err != nil {
			tb.Fatal(err)
		}
		c = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(url)
		if err != nil {
			tb.Fatal(err)
		}
		c = redis.NewClient(o)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// deleteKeys deletes the keys matching pattern, on every master of a Cluster.
func deleteKeys(tb testing.TB, c redis.UniversalClient, pattern string) {
	ctx := context.Background()
	del := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 500).Iterator()
		for it.Next(ctx) {
			c.Del(ctx, it.Val())
		}
		return it.Err()
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, del)
	case *redis.Client:
		err = del(ctx, c)
	}
	if err != nil {
		tb.Errorf("delete keys %s: %v", pattern, err)
	}
}

// clusterPort is a free port whose cluster bus port (port+10000) is valid.
func clusterPort(tb testing.TB) int {
	for {
		if p := FreePort(tb); p < 55000 {
			return p
		}
	}
}

// StartCluster runs a Redis Cluster of three masters for tb and returns
// its store URL (one seed node, the others as addr parameters).
func StartCluster(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	var nodes []string
	for range 3 {
		p := clusterPort(tb)
		Start(tb, p, "--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--dir", dir,
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", p)))
		nodes = append(nodes, fmt.Sprintf("127.0.0.1:%d", p))
	}
	out, err := exec.Command("redis-cli", append(append([]string{"--cluster", "create"}, nodes...), "--cluster-yes")...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n})
		WaitFor(tb, 20*time.Second, "cluster state ok on "+n, func() bool {
			info, err := c.ClusterInfo(context.Background()).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
		c.Close()
	}
	return fmt.Sprintf("redis://%s?addr=%s&addr=%s", nodes[0], nodes[1], nodes[2])
}
