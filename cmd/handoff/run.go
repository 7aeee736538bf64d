package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
)

// A command is one verb of the CLI. run gets the arguments after the verb.
type command struct {
	name string
	// synopses are the verb's command lines after "handoff NAME", one per
	// subcommand for a verb that has them ("status URL|--data-dir DIR"):
	// every --help reads its synopsis here, so that none drifts apart.
	synopses []string
	summary  string
	run      func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", []string{"--config FILE [--listen ADDR] [--data-dir DIR] [--store redis://HOST:PORT/DB]"}, "run an agent", runServe},
		{"send", []string{"URL TEXT [--stream] [--json]"}, "send a message to an agent", runSend},
		{"get", []string{"URL TASK_ID [--json]"}, "show a task", runGet},
		{"cancel", []string{"URL TASK_ID [--json]"}, "cancel a task", runCancel},
		{"tasks", []string{"URL [--json]"}, "list tasks", runTasks},
		{"keys", []string{"gen --out FILE [--alg EdDSA|ES256] [--kid KID] [--jwks FILE]", "hash < KEY"}, "make a card signing key; hash an API key", runKeys},
		{"card", []string{"verify URL [--jwks URL|FILE] [--kid KID]", "show URL [--jwks URL|FILE] [--json]"}, "verify or show an agent's signed card", runCard},
		{"peers", []string{"--config FILE [--json]"}, "fetch and verify the cards of the config's peers", runPeers},
		{"ledger", []string{"URL|--data-dir DIR [--limit N] [--json]"}, "list the delegations the acceptance gate committed", runLedger},
		{"delegations", []string{"URL|--config FILE|--data-dir DIR [--json]"}, "list the agent's delegations: peer, remote task, state, gate outcome", runDelegations},
		{"approvals", []string{"URL [--json]"}, "list the tool calls waiting for an approval", runApprovals},
		{"approve", []string{"URL TASK_ID [--scope once]"}, "approve a task's waiting tool call", runApprove},
		{"deny", []string{"URL TASK_ID --reason TEXT"}, "deny a task's waiting tool call: it fails with the reason", runDeny},
		{"audit", []string{"URL|--data-dir DIR [--task ID] [--json]"}, "list the agent's tool calls (MCP audit log)", runAudit},
		{"policy", []string{"explain --config FILE --tool T [--args JSON] [--caller P] [--tenant T] [--skill S] [--task ID] [--data-dir DIR | --store URL | --no-grants] [--json]", "check --config FILE [--json]", "grants (--data-dir DIR | --config FILE [--store URL]) [--revoke ID] [--json]"}, "explain the tool-call policy's decision on a call; check the policy; list or revoke grants", runPolicy},

		{"push", []string{"status URL|--data-dir DIR [--json]", "retry URL TASK_ID --config ID [--seq N] [--json]"}, "show where push deliveries stand; send a dead letter again, or retry a delivery now", runPush},
		{"store", []string{"recover --data-dir DIR [--apply] [--json]", "stats --data-dir DIR|--redis URL [--namespace NS] [--json]",
			"purge --older-than D [--tenant T] [--yes] --data-dir DIR|--redis URL [--namespace NS] [--json]"},
			"recover the embedded task store after its log was damaged; show what a task store holds; purge finished tasks (dry runs unless --apply or --yes)", runStore},
		{"webhook", []string{"listen --agent URL [--addr ADDR] [--path PATH] [--token TOKEN] [--audience URL]"}, "receive and verify push notifications", runWebhook},
		{"bench", []string{benchSynopsis}, "measure Handoff against the SDK and the machine's limit", runBench},
	}
}

// synopsis is the command line of "handoff NAME" in the command table, NAME
// being a verb ("send") or a verb and its subcommand ("push status"),
// without "handoff NAME".
func synopsis(name string) string {
	verb, sub, _ := strings.Cut(name, " ")
	for _, c := range commands() {
		if c.name != verb {
			continue
		}
		for _, s := range c.synopses {
			if sub == "" {
				return s
			}
			if rest, ok := strings.CutPrefix(s, sub+" "); ok {
				return rest
			}
		}
	}
	panic("no synopsis for " + name) // a command missing from the table is a bug of this file
}

// printSynopses writes the usage of a verb that has subcommands, one line
// per subcommand: its answer to "handoff VERB --help".
func printSynopses(w io.Writer, verb string) {
	for _, c := range commands() {
		if c.name != verb {
			continue
		}
		for i, s := range c.synopses {
			lead := "Usage:"
			if i > 0 {
				lead = "      "
			}
			fmt.Fprintf(w, "%s handoff %s %s\n", lead, verb, s)
		}
	}
	fmt.Fprintf(w, "\nRun \"handoff %s SUBCOMMAND --help\" for a subcommand's flags.\n", verb)
}

// flagDashes writes the flag names in the flag package's errors as the CLI writes them
// everywhere else: --flag.
// Each error names its flag after one of these words.
var flagDashes = regexp.MustCompile(`(defined: |argument: |for flag |for )-(\w)`)

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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "handoff COMMAND --help" for a command's flags.`)
}

// newFlagSet returns the flag set of the command name (a verb, or a verb and
// its subcommand), its --help headed by the command's synopsis in the table
// and listing its flags as they are written: --flag.
func newFlagSet(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: handoff %s %s\n", name, synopsis(name))
		printFlags(stdout, fs)
	}
	return fs
}

// printFlags writes fs's flags under "Flags:", each with its two dashes:
// the flag package prints one, which the synopses and the messages, all
// saying --flag, would contradict.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(w)
	if b.Len() == 0 {
		return
	}
	// PrintDefaults starts each flag's line with "  -NAME"; its usage text
	// follows on lines that start with a tab.
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  -") {
			lines[i] = "  --" + l[len("  -"):]
		}
	}
	fmt.Fprintf(w, "\nFlags:\n%s", strings.Join(lines, ""))
}

// parseInterleaved parses flags that may come before, between or after positional arguments
// ("handoff send URL TEXT --stream") and returns the positional ones. --help prints the
// command's help to stdout; a mistake prints nothing there and is the error, which main
// writes to stderr once.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	// The flag package would print the mistake and the whole help to the flag set's
	// output (stdout) before returning it.
	help, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() {
		fs.Usage = help
		fs.SetOutput(out)
	}()
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				help()
				return nil, err
			}
			return nil, usagef("%s: %s (see handoff %s --help)", fs.Name(), flagDashes.ReplaceAllString(err.Error(), "$1--$2"), fs.Name())
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
