// Command delegation runs a small multi-agent setup in one process: a front
// agent that delegates "count the notes" to peers it verified by their
// signed cards, and commits an answer only when its acceptance gate, which
// re-checks the evidence with its own MCP tool, agrees. One peer is honest
// (it counts with its MCP tool and returns the stats as evidence); the other
// claims success without evidence, and its answer is never committed.
//
// The front's first skill is a model skill: a model loop (here the offline
// scripted model, front-model.yaml, nothing to install) that calls the
// front's own MCP tool and both delegate skills as tools, and is shown the
// gate's decision of each, never the peer's claim.
//
//	go run ./examples/delegation
//	go run ./cmd/handoff send http://127.0.0.1:8091 "count the notes"                        # the model skill
//	go run ./cmd/handoff send http://127.0.0.1:8091 count --skill count-notes                # committed
//	go run ./cmd/handoff send --stream http://127.0.0.1:8091 count --skill count-notes-liar  # unknown, re-checked, not committed
//
// Run it from the repository's root: it builds examples/mcpserver and keeps
// each agent's data under data/delegation/ROLE.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const (
	honestAddr = "127.0.0.1:8090"
	frontAddr  = "127.0.0.1:8091"
	liarAddr   = "127.0.0.1:8092"
	dataDir    = "data/delegation"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println("Building the example MCP server and starting three agents...")
	front, wait, err := start(ctx, os.Stderr, honestAddr, frontAddr, liarAddr, dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "delegation example:", err)
		os.Exit(1)
	}
	fmt.Printf(`
  front   %s  takes "count the notes", delegates it, commits only what its gate verifies;
          its first skill is a model (offline, scripted) using its MCP tool and both peers as tools
  honest  http://%s  counts the notes with its MCP tool, returns the stats as evidence
  liar    http://%s  says it counted, returns no evidence

Try, in another terminal:

  go run ./cmd/handoff send --stream %s "count the notes"
      completed: the model counted with the front's own tool, then asked both peers;
      the honest count was committed, the liar's was not, and the model was told which

  go run ./cmd/handoff send %s count --skill count-notes
      completed: the front re-counted with its own MCP tool, agreed, and committed

  go run ./cmd/handoff send --stream %s count --skill count-notes-liar
      failed: no evidence, so "unknown"; checked again after 1s and 2s, then not committed

Ctrl-C stops the agents. Then see what the front committed (one entry per honest count):

  go run ./cmd/handoff ledger --data-dir %s/front

`, front, honestAddr, liarAddr, front, front, front, dataDir)
	<-ctx.Done()
	fmt.Println("Stopping the agents...")
	wait()
	fmt.Println("Stopped.")
}
