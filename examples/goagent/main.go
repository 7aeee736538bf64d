// Command goagent runs an agent whose skill is written in Go: an a2a-go
// executor given to handoff.New with handoff.WithExecutor. Asked about a
// note, it reads the note with its own MCP tool (handoff.Tools: the governed
// pipeline), has a verified peer count all the notes (handoff.Delegate: the
// envelope, the follow and the acceptance gate, which re-counts with the
// agent's own tool before it commits), and answers from the note and the
// committed evidence only.
//
//	go run ./examples/goagent
//	go run ./cmd/handoff send http://127.0.0.1:8095 welcome
//
// Run it from the repository's root: it builds examples/mcpserver and keeps
// each agent's data under data/goagent/ROLE.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const (
	agentAddr = "127.0.0.1:8095"
	peerAddr  = "127.0.0.1:8096"
	dataDir   = "data/goagent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println("Building the example MCP server and starting the Go agent and its peer...")
	agent, wait, err := start(ctx, os.Stderr, agentAddr, peerAddr, dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goagent example:", err)
		os.Exit(1)
	}
	fmt.Printf(`
  agent  %s  a skill written in Go: reads the note you name with its MCP tool,
                             has the peer count the notes, answers from the committed count
  peer   http://%s  counts the notes with its MCP tool

Try, in another terminal:

  go run ./cmd/handoff send %s welcome
      completed: the note's text, and the count the agent's gate verified and committed

  go run ./cmd/handoff send %s no-such-note
      failed: the agent's own tool found no such note, so it delegated nothing

Ctrl-C stops the agents.

`, agent, peerAddr, agent, agent)
	<-ctx.Done()
	fmt.Println("Stopping the agents...")
	wait()
}
