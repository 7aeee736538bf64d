// Command delegation runs a small multi-agent setup in one process: a front
// agent that delegates "count the notes" to peers it verified by their
// signed cards, and commits an answer only when its acceptance gate, which
// re-checks the evidence with its own MCP tool, agrees. One peer is honest
// (it counts with its MCP tool and returns the stats as evidence); the other
// claims success without evidence, and its answer is never committed.
//
//	go run ./examples/delegation
//	handoff send http://127.0.0.1:8091 count --skill count-notes        # committed
//	handoff send http://127.0.0.1:8091 count --skill count-notes-liar   # not committed: unknown
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	front, wait, err := start(ctx, os.Stderr, "127.0.0.1:8090", "127.0.0.1:8091", "127.0.0.1:8092", "data/delegation")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("front agent: %s\n  try: go run ./cmd/handoff send %s count --skill count-notes\n"+
		"  and: go run ./cmd/handoff send %s count --skill count-notes-liar\n", front, front, front)
	<-ctx.Done()
	wait()
}
