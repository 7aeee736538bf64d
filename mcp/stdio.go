package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// stopGrace is how long a stdio server has to exit after its stdin closes before its whole
// process group is killed.
const stopGrace = 2 * time.Second

// groupTransport starts a stdio server in its own process group. The SDK's CommandTransport
// signals only the process it started, so a server that forks (npx, a shell wrapper) would
// leave its children behind on shutdown.
type groupTransport struct {
	cmd *exec.Cmd
}

// Connect starts the command and speaks newline-delimited JSON over its stdin and stdout.
func (t *groupTransport) Connect(ctx context.Context) (mcpsdk.Connection, error) {
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Our own pipe for stdout, not StdoutPipe: Wait closes that one while the session may
	// still be reading, which turns a dead server into a read error instead of a clean EOF.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	t.cmd.Stdout = w
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		stdout.Close()
		w.Close()
		return nil, err
	}
	err = t.cmd.Start()
	w.Close() // the child holds its copy; ours would keep EOF from ever arriving
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("start %s: %w", t.cmd.Path, err)
	}
	pid := t.cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		_ = t.cmd.Wait()
		// The server is gone: so is its group, lest a grandchild holding stdout keep the
		// session from seeing EOF.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		close(exited)
	}()
	tr := &mcpsdk.IOTransport{
		Reader: stdout,
		Writer: &groupStopper{stdin: stdin, pid: pid, exited: exited},
	}
	return tr.Connect(ctx)
}

// groupStopper closes the server's stdin, the polite way to end a stdio server, then kills the
// process group if the server has not exited within stopGrace, and always kills what is left of
// the group, so that no grandchild outlives the session.
type groupStopper struct {
	stdin  io.WriteCloser
	pid    int
	exited <-chan struct{}
}

func (g *groupStopper) Write(p []byte) (int, error) { return g.stdin.Write(p) }

func (g *groupStopper) Close() error {
	err := g.stdin.Close()
	select {
	case <-g.exited:
	case <-time.After(stopGrace):
	}
	if kerr := syscall.Kill(-g.pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
		err = errors.Join(err, fmt.Errorf("kill process group %d: %w", g.pid, kerr))
	}
	<-g.exited
	return err
}
