package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoff-a2a/handoff"
)

// runPeers fetches and verifies the cards of the config's peers and shows,
// for each, its key id, verification state and skills.
func runPeers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("peers", stdout)
	configPath := fs.String("config", "", "the agent's YAML config `FILE` (required)")
	asJSON := fs.Bool("json", false, "print JSON, one peer a line, and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *configPath == "" {
		return usagef("peers: want --config FILE and nothing else")
	}
	cfg, err := handoff.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	dir, err := handoff.NewPeerDirectory(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := dir.Refresh(ctx); err != nil {
		return fmt.Errorf("refresh peers: %w", err)
	}
	type row struct {
		Name   string   `json:"name"`
		URL    string   `json:"url"`
		State  string   `json:"state"`
		KeyID  string   `json:"kid,omitempty"`
		Reason string   `json:"reason,omitempty"`
		Skills []string `json:"skills"`
	}
	var rows []row
	for _, p := range dir.Peers() {
		r := row{Name: p.Name, URL: p.BaseURL, State: string(p.State), KeyID: p.KeyID, Skills: []string{}}
		if p.Err != nil {
			r.Reason = p.Err.Error()
		}
		if p.Card != nil && p.State == "verified" {
			for _, s := range p.Card.Skills {
				r.Skills = append(r.Skills, s.ID)
			}
		}
		rows = append(rows, r)
	}
	if *asJSON {
		return writeJSONLines(stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no peers in", *configPath)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tSTATE\tKID\tSKILLS\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.State, r.KeyID, strings.Join(r.Skills, ","), r.Reason)
	}
	return tw.Flush()
}
