package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// A command is one verb of the CLI. run gets the arguments after the verb.
type command struct {
	name    string
	args    string // synopsis of the arguments, for help
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "--config FILE [--listen ADDR] [--data-dir DIR] [--store redis://HOST:PORT/DB]", "run an agent", runServe},
		{"send", "URL TEXT [--stream] [--json]", "send a message to an agent", runSend},
		{"get", "URL TASK_ID [--json]", "show a task", runGet},
		{"cancel", "URL TASK_ID [--json]", "cancel a task", runCancel},
		{"tasks", "URL [--json]", "list tasks", runTasks},
		{"keys", "gen --out FILE [--alg EdDSA|ES256] | hash", "make a card signing key; hash an API key", runKeys},
		{"card", "verify|show URL [--jwks URL|FILE] [--kid KID]", "verify or show an agent's signed card", runCard},
		{"peers", "--config FILE [--json]", "fetch and verify the cards of the config's peers", runPeers},
		{"ledger", "--data-dir DIR [--json]", "list the delegations the acceptance gate committed", runLedger},
		{"delegations", "URL|--config FILE|--data-dir DIR [--json]", "list the agent's delegations: peer, remote task, state, gate outcome", runDelegations},
		{"audit", "URL|--data-dir DIR [--task ID] [--json]", "list the agent's tool calls (MCP audit log)", runAudit},
		{"push", "status URL|--data-dir DIR [--json]", "show where push deliveries stand", runPush},
		{"store", storeSynopsis, "recover the embedded task store after its log was damaged (a dry run unless --apply)", runStore},
		{"webhook", "listen --agent URL [--addr ADDR] [--path PATH] [--token T] [--audience URL]", "receive and verify push notifications", runWebhook},
		{"bench", benchSynopsis, "measure Handoff against the SDK and the machine's limit", runBench},
	}
}

// usageError is a mistake on the command line; it exits with code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func exitCode(err error) int {
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// run executes one command line. It is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stderr)
		return usagef("no command given")
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		printUsage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	printUsage(stderr)
	return usagef("unknown command %q", name)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: handoff COMMAND [ARGS]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "handoff COMMAND --help" for a command's flags.`)
}

// newFlagSet returns a FlagSet whose --help prints the command's synopsis and flags to stdout.
func newFlagSet(c string, synopsis string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(c, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: handoff %s %s\n", c, synopsis)
		var b strings.Builder
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(stdout)
		if b.Len() > 0 {
			fmt.Fprintf(stdout, "\nFlags:\n%s", b.String())
		}
	}
	return fs
}

// parseInterleaved parses flags that may come before, between or after positional arguments
// ("handoff send URL TEXT --stream") and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
