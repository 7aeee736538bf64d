package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/datadir"
)

// runDelegations lists an agent's outbound delegations: each local task
// that delegated, its peer, the peer's task, that task's last known state,
// the acceptance gate's outcome and, when it did not commit, the reason.
// It reads a running agent by URL (the caller's own delegations, or all
// for an approver), or a stopped agent's data directory, given directly or
// through its config.
func runDelegations(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("delegations", stdout)
	configPath := fs.String("config", "", "read the data directory of the stopped agent this `FILE` configures")
	dataDir := fs.String("data-dir", "", "read the ledger of a stopped agent in `DIR`")
	out := addOutputFlags(fs, "give up after `D`")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	given := 0
	for _, set := range []bool{*configPath != "", *dataDir != "", len(rest) > 0} {
		if set {
			given++
		}
	}
	if given != 1 || len(rest) > 1 {
		return usagef("delegations: give one of the agent's URL, --config FILE or --data-dir DIR")
	}
	var list []*acceptance.Delegation
	if len(rest) == 1 {
		var body struct {
			Delegations []*acceptance.Delegation `json:"delegations"`
		}
		if err := getAgentJSON(ctx, rest[0], "/a2a/delegations", nil, out, &body); err != nil {
			return fmt.Errorf("delegations: %w", err)
		}
		list = body.Delegations
	} else {
		if *configPath != "" {
			cfg, err := handoff.LoadConfig(*configPath)
			if err != nil {
				return err
			}
			*dataDir = cfg.DataDir
		}
		if list, err = localDelegations(ctx, *dataDir); err != nil {
			return err
		}
	}
	if out.json {
		return writeJSONLines(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no delegations")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPDATED\tTASK\tSKILL\tPEER\tREMOTE TASK\tREMOTE STATE\tOUTCOME\tREASON")
	for _, d := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Updated.Format(time.RFC3339), d.TaskID, d.Skill, d.Peer,
			orDash(d.RemoteTaskID), orDash(string(d.RemoteState)), orDash(d.Outcome), orDash(oneLine(d.Reason)))
	}
	return tw.Flush()
}

// localDelegations reads the index of delegations of the stopped agent
// whose data is in dir; an agent that never delegated has none.
func localDelegations(ctx context.Context, dir string) ([]*acceptance.Delegation, error) {
	path, err := datadir.Find(dir, datadir.Ledger)
	if err != nil || path == "" {
		return nil, err
	}
	l, err := acceptance.OpenBoltLedger(path)
	if err != nil {
		return nil, fmt.Errorf("open ledger (is the agent running? then ask it by URL): %w", err)
	}
	defer l.Close()
	return l.Delegations(ctx)
}

// oneLine keeps a reason on its row: control characters (a peer's
// words may hold any) become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
