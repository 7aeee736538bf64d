package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-a2a/handoff/mcp"
)

var (
	// exampleServer is the examples/mcpserver binary, built once for every test.
	exampleServer string
	// everything is the entry point of @modelcontextprotocol/server-everything, or nodeErr
	// says why it cannot run; the tests that need it fail with that reason.
	everything string
	nodeErr    error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleServer = filepath.Join(dir, "mcpserver")
	build := exec.Command("go", "build", "-o", exampleServer, "../examples/mcpserver")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build examples/mcpserver:", err)
		os.Exit(1)
	}
	everything, nodeErr = installEverything()
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// installEverything installs the npm server from the committed lock when node_modules is
// missing, and returns its entry point.
func installEverything() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is required for the server-everything tests: %w", err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "npm"))
	if err != nil {
		return "", err
	}
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err == nil {
		return entry, nil
	}
	ci := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	ci.Dir = dir
	if out, err := ci.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	return entry, nil
}

// start runs a Manager until the test ends.
func start(t *testing.T, servers []mcp.ServerConfig, opts ...mcp.ManagerOption) *mcp.Manager {
	t.Helper()
	m, err := mcp.NewManager(servers, opts...)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	return m
}

// waitFor waits, without sleeping, until cond holds after some catalog or status change.
func waitFor(t *testing.T, m *mcp.Manager, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		updated := m.Updated()
		if cond() {
			return
		}
		select {
		case <-updated:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; servers: %+v", what, m.Servers())
		}
	}
}

func status(m *mcp.Manager, name string) mcp.ServerStatus {
	for _, s := range m.Servers() {
		if s.Name == name {
			return s
		}
	}
	return mcp.ServerStatus{}
}

func waitReady(t *testing.T, m *mcp.Manager, name string) {
	t.Helper()
	waitFor(t, m, name+" ready", func() bool { return status(m, name).State == mcp.StateReady })
}

// poll retries cond until it holds or 30s pass; for state outside the Manager (files a server
// writes), which has no change notification.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// httpExample runs the example server over streamable HTTP as a real process and returns its
// URL, read from the line it prints once it listens.
func httpExample(t *testing.T, args ...string) string {
	t.Helper()
	url, _ := runHTTPExample(t, "127.0.0.1:0", args...)
	return url
}

// runHTTPExample starts the example server on addr and returns its URL and process; the
// process is killed when the test ends.
func runHTTPExample(t *testing.T, addr string, args ...string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(exampleServer, append([]string{"--http", addr}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("example server: %v", err)
	}
	go io.Copy(io.Discard, stderr) // keep the pipe drained
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "mcpserver: serving ")
	if !ok {
		t.Fatalf("example server said %q", line)
	}
	return url, cmd
}
