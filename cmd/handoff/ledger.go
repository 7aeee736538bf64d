package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
	"github.com/handoff-a2a/handoff/internal/datadir"
)

// runLedger lists the commit ledger, newest first: every delegation the
// acceptance gate committed, with the contract version and evidence
// digests. It reads a running agent by URL (the commits of the caller's own
// delegations, or all for an approver) or a stopped agent's data directory.
func runLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ledger", stdout)
	dataDir := fs.String("data-dir", "", "read the ledger of a stopped agent in `DIR`")
	limit := fs.Int("limit", 0, "show only the newest `N` entries")
	out := addOutputFlags(fs, "give up after `D`")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("ledger: --limit must not be negative, got %d", *limit)
	}
	var entries []*acceptance.Entry
	switch {
	case *dataDir != "" && len(rest) == 0:
		entries, err = localLedger(ctx, *dataDir, *limit)
	case *dataDir == "" && len(rest) == 1:
		entries, err = remoteLedger(ctx, rest[0], *limit, out)
	default:
		return usagef("ledger: give the agent's URL or --data-dir, not both")
	}
	if err != nil {
		return err
	}
	if out.json {
		return writeJSONLines(stdout, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintln(stdout, "no committed delegations")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMMITTED\tDELEGATION\tSKILL\tCONTRACT\tEVIDENCE")
	for _, e := range entries {
		var ev []string
		for name, d := range e.EvidenceDigests {
			ev = append(ev, name+"="+shortDigest(d))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.CommittedAt.Format(time.RFC3339), e.DelegationID, e.Skill, e.ContractVersion, strings.Join(ev, ","))
	}
	return tw.Flush()
}

// localLedger reads the ledger of the stopped agent whose data is in dir;
// an agent that never delegated has none, hence no entries.
func localLedger(ctx context.Context, dir string, limit int) ([]*acceptance.Entry, error) {
	path, err := datadir.Find(dir, datadir.Ledger)
	if err != nil || path == "" {
		return nil, err
	}
	l, err := acceptance.OpenBoltLedger(path)
	if err != nil {
		return nil, fmt.Errorf("open ledger (is the agent running? then ask it by URL): %w", err)
	}
	defer l.Close()
	return l.List(ctx, limit)
}

// remoteLedger asks a running agent for the commits the caller may see.
func remoteLedger(ctx context.Context, raw string, limit int, o *outputFlags) ([]*acceptance.Entry, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var body struct {
		Entries []*acceptance.Entry `json:"entries"`
	}
	if err := getAgentJSON(ctx, raw, "/a2a/ledger", q, o, &body); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return body.Entries, nil
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
