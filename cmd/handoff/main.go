// Command handoff runs an A2A agent and talks to A2A agents.
//
// Run "handoff help" for the list of commands and "handoff COMMAND --help" for one command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT and SIGTERM cancel ctx; commands treat that as a clean stop.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(exitCode(err))
	}
}
