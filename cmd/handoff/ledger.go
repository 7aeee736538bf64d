package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoff-a2a/handoff/acceptance"
)

// runLedger lists the commit ledger of a stopped agent: every delegation its
// acceptance gate committed, with the contract version and evidence digests.
func runLedger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ledger", "--data-dir DIR [--json] [--limit N]", stdout)
	dataDir := fs.String("data-dir", "", "the agent's data `directory` (the agent must be stopped)")
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 0, "show only the newest `N` entries")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *dataDir == "" {
		return usagef("ledger: want --data-dir DIR")
	}
	l, err := acceptance.OpenBoltLedger(filepath.Join(*dataDir, "ledger.db"))
	if err != nil {
		return fmt.Errorf("open ledger (is the agent running?): %w", err)
	}
	defer l.Close()
	entries, err := l.List(ctx, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(entries)
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

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
