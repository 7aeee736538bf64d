package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/examples/scriptedmodel/script"
)

// start builds the example MCP server, starts the front's scripted model,
// then serves the honest peer, the lying peer and the front agent on the
// given addresses, each with its data
// under dataDir/ROLE, until ctx ends. It returns the front agent's URL and a
// function that stops the agents (if ctx has not) and waits until they have.
func start(ctx context.Context, logTo io.Writer, honestAddr, frontAddr, liarAddr, dataDir string) (string, func(), error) {
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
	// The front's model: the scripted model, in this process, on a port of its own.
	model, err := script.Load(filepath.Join(root, "examples", "delegation", "front-model.yaml"))
	if err != nil {
		return "", nil, err
	}
	modelLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	common := fmt.Sprintf(`auth: {anonymous: true}
log: {level: warn}
limits: {shutdown_grace: 2s}
mcp_servers: [{name: notes, command: %q}]
tool_contracts: [{tool: notes__stats, effect: read, risk: low, approval: none}]
`, bin)
	honestURL, liarURL := "http://"+honestAddr, "http://"+liarAddr
	configs := []struct{ role, addr, yaml string }{
		{"honest", honestAddr, "name: Honest counter\ndescription: Counts notes with its MCP tool.\n" + common +
			"skills: [{id: notes-stats, name: Note stats, tags: [honest], executor: mcp, tool: notes__stats}]\n"},
		{"liar", liarAddr, "name: Lying counter\ndescription: Says it counted, shows nothing.\n" + common +
			"skills: [{id: notes-stats, name: Note stats, tags: [liar], executor: tck}]\n"},
		{"front", frontAddr, "name: Front\ndescription: Delegates note counts and commits only verified answers.\n" + common +
			fmt.Sprintf(`peers:
  - {name: honest, url: %q, trust: {jku_prefixes: [%q]}}
  - {name: liar, url: %q, trust: {jku_prefixes: [%q]}}
models: [{name: scripted, base_url: %q, model: scripted}]
skills:
  - id: assistant
    name: Notes assistant
    description: Counts the notes with its own tool and checks the peers' counts.
    executor: model
    model:
      use: scripted
      instructions: You count the team's notes. Use notes__stats, and ask the peers through count-notes and count-notes-liar.
      tools: [notes__stats]
      delegates: [count-notes, count-notes-liar]
  - {id: count-notes, name: Count notes, description: The honest peer counts the notes., executor: delegate, delegate: {skill: notes-stats, tags: [honest], contract: %q}}
  - {id: count-notes-liar, name: Count notes (liar), description: The lying peer counts the notes., executor: delegate, delegate: {skill: notes-stats, tags: [liar], contract: %q}}
`, honestURL, honestURL+"/.well-known/", liarURL, liarURL+"/.well-known/", "http://"+modelLn.Addr().String()+"/v1",
				filepath.Join(root, "examples", "delegation", "contract.yaml"),
				filepath.Join(root, "examples", "delegation", "contract-liar.yaml"))},
	}
	// The agents stop with ctx, or at once when one of them cannot start.
	ctx, cancel := context.WithCancel(ctx)
	var served sync.WaitGroup
	stopAll := func() { cancel(); served.Wait() }
	modelSrv := &http.Server{Handler: script.NewServer(model), ReadHeaderTimeout: 10 * time.Second}
	served.Go(func() { _ = modelSrv.Serve(modelLn) })
	served.Go(func() { <-ctx.Done(); _ = modelSrv.Close() })
	for _, c := range configs {
		cfg, err := handoff.ParseConfig(c.role, strings.NewReader(c.yaml))
		if err != nil {
			stopAll()
			return "", nil, fmt.Errorf("the %s agent's config: %w", c.role, err)
		}
		// One directory per role, so `handoff ledger --data-dir DIR/front` finds the front's ledger.
		cfg.DataDir = filepath.Join(dataDir, c.role)
		a, err := handoff.New(ctx, cfg, handoff.WithLogger(slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))))
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
	return "http://" + frontAddr, stopAll, nil
}

// repoRoot finds the module's root, where go build finds the example server.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the repository: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}
