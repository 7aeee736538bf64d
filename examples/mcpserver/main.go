// Command mcpserver is an example MCP tool server with a tool for every branch of Handoff's
// tool pipeline: a read tool, a write tool, a slow tool, structured output (and a way to break
// it), a failing tool, and a tool that changes the tool list at run time.
//
// It speaks stdio by default; --http ADDR serves streamable HTTP instead:
//
//	go run ./examples/mcpserver                      # stdio
//	go run ./examples/mcpserver --http 127.0.0.1:8931 # http://127.0.0.1:8931/mcp
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
