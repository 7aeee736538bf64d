// Package e2e runs the built handoff binary as a separate process and talks
// to it over real sockets on 127.0.0.1, the way a deployment is used: a2a-go's
// own clients on every binding, raw HTTP for bad input, signals and kill -9
// for shutdown and durability.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"gopkg.in/yaml.v3"
)

// handoffBin is the binary under test, built once by TestMain.
var handoffBin string

// Bounds that only guard against hangs; nothing waits for them to pass.
const (
	readyTimeout = 30 * time.Second // the race-built binary starts slower
	exitTimeout  = 30 * time.Second // shutdown_grace (1s) plus the drain (grace+5s) fit well inside
	callTimeout  = 30 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "handoff-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	handoffBin = filepath.Join(dir, "handoff")
	args := []string{"build", "-o", handoffBin}
	if raceEnabled {
		// The agent gets the race detector too when the tests have it: a data
		// race in the server then makes it exit 66, which the exit-code
		// checks of every test report.
		args = append(args, "-race")
	}
	args = append(args, "github.com/handoff-a2a/handoff/cmd/handoff")
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building cmd/handoff failed:", err)
		return 1
	}
	return m.Run()
}

// agentConfig is what a test changes in the conformance agent's YAML.
type agentConfig struct {
	dataDir         string         // default t.TempDir()
	maxBodyBytes    int64          // default: the product's default
	pushRetryDelay  string         // default: the product's default
	pushMaxAttempts int            // default: the product's default
	store           map[string]any // default: the embedded store
}

// writeConfig writes examples/conformance/agent.yaml with the e2e limits to
// a temp file. shutdown_grace is 1s so a stopping agent fails a running
// test-resubscribe-message-id task (it waits 10s) quickly.
func writeConfig(t *testing.T, c agentConfig) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "examples", "conformance", "agent.yaml"))
	if err != nil {
		t.Fatalf("read the conformance config: %v", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		t.Fatalf("parse the conformance config: %v", err)
	}
	if _, ok := doc["limits"]; ok {
		t.Fatalf("examples/conformance/agent.yaml now sets limits; merge them here instead of replacing them")
	}
	limits := map[string]any{"shutdown_grace": "1s"}
	if c.maxBodyBytes > 0 {
		limits["max_body_bytes"] = c.maxBodyBytes
	}
	doc["limits"] = limits
	if p, ok := doc["push"].(map[string]any); ok {
		if c.pushRetryDelay != "" {
			p["retry_delay"] = c.pushRetryDelay
		}
		if c.pushMaxAttempts > 0 {
			p["max_attempts"] = c.pushMaxAttempts
		}
	}
	if c.store != nil {
		if c.store["kind"] == "redis" && c.store["secret_key_files"] == nil {
			// Replicas share the secret that seals push configs' tokens:
			// the first config written for a store map names it for all.
			secret := filepath.Join(t.TempDir(), "store.secret")
			if err := os.WriteFile(secret, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
				t.Fatalf("write store secret: %v", err)
			}
			c.store["secret_key_files"] = []string{secret}
		}
		doc["store"] = c.store
	}
	// listen and data_dir come from the command line, as the brief of each
	// test wants; the ones in the file would point at a fixed port and ./data.
	delete(doc, "listen")
	delete(doc, "data_dir")
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatalf("marshal config: %v", err)
	}
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatalf("write config: %v", err)
	}
	return path
}

// agent is one running handoff serve process.
type agent struct {
	t       *testing.T
	dataDir string
	addr    string // 127.0.0.1:port
	base    string // http://127.0.0.1:port

	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{} // closed once cmd.Wait returned
	state  *os.ProcessState

	mu      sync.Mutex
	stopped bool // the test stopped or killed it itself
}

// syncBuffer collects the agent's log; the process writes while tests read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddr returns a 127.0.0.1 address with a port the kernel just handed
// out and released; the agent binds it a moment later.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startAgent runs `handoff serve` with the conformance config on a free
// port and returns once /healthz answers.
func startAgent(t *testing.T, c agentConfig) *agent {
	t.Helper()
	if c.dataDir == "" {
		c.dataDir = t.TempDir()
	}
	a := launch(t, "agent", writeConfig(t, c), freeAddr(t), c.dataDir)
	a.waitReady()
	return a
}

// waitReady polls GET /healthz until it answers "ok", the process dies, or
// the deadline passes.
func (a *agent) waitReady() {
	a.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		status, body, err := httpGet(a.t.Context(), a.base+"/healthz")
		if err == nil && status == http.StatusOK && body == "ok\n" {
			return
		}
		if err == nil {
			err = fmt.Errorf("status %d, body %q", status, body)
		}
		last = err
		select {
		case <-a.exited:
			a.t.Fatalf("agent exited before it was ready (%v); log:\n%s", a.state, a.stderr.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agent not ready within %s: last /healthz attempt: %v; log:\n%s", readyTimeout, last, a.stderr.String())
		}
	}
}

// stop sends sig and returns the exit code, or -1 when a signal ended the
// process. It fails the test if the process does not exit in time.
func (a *agent) stop(sig os.Signal) int {
	a.t.Helper()
	code, err := a.signal(sig)
	if err != nil {
		a.t.Fatalf("%v; log:\n%s", err, a.stderr.String())
	}
	return code
}

// signal is stop without the test: it may run on any goroutine. A process
// that does not exit in time is killed and reported as an error.
func (a *agent) signal(sig os.Signal) (int, error) {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	select {
	case <-a.exited:
		return a.state.ExitCode(), nil
	default:
	}
	if err := a.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, fmt.Errorf("signal agent: %w", err)
	}
	select {
	case <-a.exited:
		return a.state.ExitCode(), nil
	case <-time.After(exitTimeout):
		_ = a.cmd.Process.Kill()
		<-a.exited
		return -1, fmt.Errorf("agent did not exit within %s of %v", exitTimeout, sig)
	}
}

// exitReason explains an exit code 66 of the race-built agent: the race
// detector found a data race in the product, reported in the agent's log.
func (a *agent) exitReason(code int) string {
	if code == 66 && strings.Contains(a.stderr.String(), "WARNING: DATA RACE") {
		return "; the agent is built with -race and the race detector found a DATA RACE in the product (see the agent log)"
	}
	return ""
}

// kill9 ends the process with SIGKILL: no shutdown code runs.
func (a *agent) kill9() {
	a.t.Helper()
	if code := a.stop(syscall.SIGKILL); code != -1 {
		a.t.Fatalf("agent exit code after SIGKILL = %d, want -1 (killed by the signal)", code)
	}
	if ws, ok := a.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		a.t.Fatalf("agent state after SIGKILL = %v, want killed by SIGKILL", a.state)
	}
}

// httpGet is a plain GET with the body read whole.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// callCtx bounds one call or stream, so a hang fails the test instead of
// stalling the whole run.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// uniqueID gives message ids the TCK prefix the conformance agent switches
// on, with a suffix that keeps every message distinct.
func uniqueID(prefix string) string {
	return prefix + "-" + uuid.NewString()
}
