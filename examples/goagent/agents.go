package main

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/mcp"
)

// noteReporter is the agent's skill, an executor written for a2a-go: the
// only Handoff calls in it are handoff.Tools and handoff.Delegate.
type noteReporter struct{}

func (noteReporter) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		say := func(state a2a.TaskState, text string) {
			yield(a2a.NewStatusUpdateEvent(ec, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))), nil)
		}
		name := strings.TrimSpace(textOf(ec.Message))
		// One MCP tool, through the governed pipeline (contract, policy, audit).
		note, err := handoff.Tools(ctx).Call(ctx, "notes__read_note", map[string]any{"name": name})
		if err != nil {
			yield(nil, err)
			return
		}
		if note.Outcome != mcp.OutcomeSuccess {
			say(a2a.TaskStateFailed, fmt.Sprintf("Note %q could not be read (%s); nothing was delegated.", name, note.Outcome))
			return
		}
		// The count comes from a peer, and counts only once the gate committed it.
		d, err := handoff.Delegate(ctx, "count-notes", a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("count")))
		if err != nil {
			yield(nil, err)
			return
		}
		if d.Outcome != acceptance.Committed {
			say(a2a.TaskStateFailed, fmt.Sprintf("Note %q says %q; the note count was not committed (%s): %s", name, note.Text, d.Outcome, d.Reason))
			return
		}
		count := "?"
		for _, a := range d.Artifacts {
			for _, p := range a.Parts {
				if stats, ok := p.Data().(map[string]any); ok {
					count = fmt.Sprint(stats["notes"])
				}
			}
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(fmt.Sprintf("Note %q says %q. Notes kept: %s (counted by %s, verified and committed).",
			name, note.Text, count, d.Peer))), nil) {
			return
		}
		say(a2a.TaskStateCompleted, "Answered from the note and the committed count.")
	}
}

func (noteReporter) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func textOf(m *a2a.Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

// start builds the example MCP server, then serves the peer and the Go
// agent on the given addresses, each with its data under dataDir/ROLE, until
// ctx ends. It returns the agent's URL and a function that stops both (if
// ctx has not) and waits until they have.
func start(ctx context.Context, logTo io.Writer, agentAddr, peerAddr, dataDir string) (string, func(), error) {
	root, err := repoRoot()
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dataDir, "mcpserver")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", nil, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./examples/mcpserver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("build the example MCP server: %v\n%s", err, out)
	}
	bin, _ = filepath.Abs(bin)
	common := fmt.Sprintf(`auth: {anonymous: true}
log: {level: warn}
limits: {shutdown_grace: 2s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts:
  - {tool: notes__stats, effect: read, risk: low, approval: none}
  - {tool: notes__read_note, effect: read, risk: low, approval: none}
`, bin)
	peerURL := "http://" + peerAddr
	configs := []struct {
		role, addr, yaml string
		opts             []handoff.Option
	}{
		{"peer", peerAddr, "name: Note counter\ndescription: Counts notes with its MCP tool.\n" + common +
			"skills: [{id: notes-stats, name: Note stats, executor: mcp, tool: notes__stats}]\n", nil},
		{"agent", agentAddr, "name: Note reporter\ndescription: Reports on a note, with a verified count of all notes.\n" + common +
			fmt.Sprintf(`peers: [{name: counter, url: %q, trust: {jku_prefixes: [%q]}}]
skills:
  - {id: report, name: Report on a note, description: Name a note., executor: go}
  - {id: count-notes, name: Count notes, executor: delegate, delegate: {skill: notes-stats, contract: %q}}
`, peerURL, peerURL+"/.well-known/", filepath.Join(root, "examples", "delegation", "contract.yaml")),
			[]handoff.Option{handoff.WithExecutor("report", noteReporter{})}},
	}
	ctx, cancel := context.WithCancel(ctx)
	var served sync.WaitGroup
	stopAll := func() { cancel(); served.Wait() }
	for _, c := range configs {
		cfg, err := handoff.ParseConfig(c.role, strings.NewReader(c.yaml))
		if err != nil {
			stopAll()
			return "", nil, fmt.Errorf("the %s agent's config: %w", c.role, err)
		}
		cfg.DataDir = filepath.Join(dataDir, c.role)
		logger := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
		a, err := handoff.New(ctx, cfg, append(c.opts, handoff.WithLogger(logger))...)
		if err != nil {
			stopAll()
			return "", nil, fmt.Errorf("start the %s agent: %w", c.role, err)
		}
		ln, err := net.Listen("tcp", c.addr)
		if err != nil {
			a.Close()
			stopAll()
			return "", nil, fmt.Errorf("the %s agent: %w (is the example already running?)", c.role, err)
		}
		served.Go(func() {
			if err := a.Serve(ctx, ln); err != nil {
				fmt.Fprintf(logTo, "%s: %v\n", cfg.Name, err)
			}
		})
	}
	return "http://" + agentAddr, stopAll, nil
}

// repoRoot finds the module's root, where go build finds the example server.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
