package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	handoff "github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/tasks"
)

// storeTarget is the flags that name a task store: a stopped agent's data
// directory, or Redis.
type storeTarget struct {
	dataDir, redisURL, namespace *string
}

func addStoreTarget(fs *flag.FlagSet) storeTarget {
	return storeTarget{
		dataDir:   fs.String("data-dir", "", "the embedded store of the stopped agent in `DIR`"),
		redisURL:  fs.String("redis", "", "the store in Redis at `URL` (redis://HOST:PORT/DB); the agent may be running"),
		namespace: fs.String("namespace", "", "with --redis: the agent's store.namespace `NS` (its name by default)"),
	}
}

// config is the part of an agent's config the store commands read.
func (t storeTarget) config(cmd string) (*handoff.Config, error) {
	switch {
	case *t.dataDir != "" && *t.redisURL == "" && *t.namespace == "":
		return &handoff.Config{DataDir: *t.dataDir}, nil
	case *t.dataDir == "" && *t.redisURL != "" && *t.namespace != "":
		return &handoff.Config{Store: handoff.StoreConfig{Kind: "redis", URL: *t.redisURL, Namespace: *t.namespace}}, nil
	case *t.redisURL != "" && *t.namespace == "":
		return nil, usagef("%s: --redis needs --namespace (the agent's store.namespace, by default its name)", cmd)
	}
	return nil, usagef("%s: want --data-dir DIR or --redis URL --namespace NS", cmd)
}

// runStoreStats is "handoff store stats".
func runStoreStats(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("store stats", stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: handoff store stats %s\n\n", synopsis("store stats"))
		fmt.Fprint(stdout, `Show what a task store holds: its tasks by state, the room it takes (the
file and its log for the embedded store, the memory of the namespace's keys
on Redis), the task whose status changed longest ago, and the last purge
(when, how many tasks; and how many all purges deleted). The embedded store
of a running agent is locked: stop the agent first.
`)
		printFlags(stdout, fs)
	}
	target := addStoreTarget(fs)
	asJSON := fs.Bool("json", false, "print the stats as JSON")
	rest, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("store stats: unexpected argument %q", rest[0])
	}
	cfg, err := target.config("store stats")
	if err != nil {
		return err
	}
	st, err := handoff.StoreStats(ctx, cfg)
	if err != nil {
		return fmt.Errorf("store stats: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	return writeStats(stdout, st, time.Now())
}

// writeStats prints a store's stats for an operator.
func writeStats(w io.Writer, st *tasks.StoreStats, now time.Time) error {
	fmt.Fprintf(w, "tasks: %d\n", st.Tasks)
	states := make([]a2a.TaskState, 0, len(st.ByState))
	for s := range st.ByState {
		states = append(states, s)
	}
	slices.Sort(states)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range states {
		fmt.Fprintf(tw, "  %s\t%d\n", s, st.ByState[s])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "bytes: %d (%.1f MiB)\n", st.Bytes, float64(st.Bytes)/(1<<20))
	if st.Oldest != "" {
		fmt.Fprintf(w, "oldest: task %s, status changed %s (%s ago)\n", st.Oldest, st.OldestUpdated.UTC().Format(time.RFC3339), now.Sub(st.OldestUpdated).Round(time.Second))
	}
	if st.LastPurge.IsZero() {
		fmt.Fprintln(w, "last purge: never")
	} else {
		fmt.Fprintf(w, "last purge: %s, %d tasks (%d purged in all)\n", st.LastPurge.UTC().Format(time.RFC3339), st.LastPurgeCount, st.Purged)
	}
	return nil
}

// runStorePurge is "handoff store purge".
func runStorePurge(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("store purge", stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: handoff store purge %s\n\n", synopsis("store purge"))
		fmt.Fprint(stdout, `Delete the finished tasks (completed, failed, canceled, rejected) whose
status last changed more than --older-than ago, as an agent's retention
(retention.finished_tasks) does: each with its events, push configs and
delivery state, and the blobs no kept task names; their commit ledger
entries are kept and marked with when the task was purged.

By default this is a dry run: it lists the tasks that would go and changes
nothing. With --yes it deletes them. The embedded store of a running agent
is refused (the agent holds its files): stop the agent, or let its own
retention purge.
`)
		printFlags(stdout, fs)
	}
	target := addStoreTarget(fs)
	olderThan := fs.Duration("older-than", 0, "purge finished tasks whose status changed more than `D` ago (like 720h)")
	tenant := fs.String("tenant", "", "purge only the tasks of tenant `T`")
	yes := fs.Bool("yes", false, "delete (default: a dry run that lists what would go)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	rest, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("store purge: unexpected argument %q", rest[0])
	}
	if *olderThan <= 0 {
		return usagef("store purge: want --older-than D, a positive duration (like 720h)")
	}
	cfg, err := target.config("store purge")
	if err != nil {
		return err
	}
	keep := tasks.Retention{Finished: *olderThan}
	tenantSet := false
	fs.Visit(func(f *flag.Flag) { tenantSet = tenantSet || f.Name == "tenant" })
	if tenantSet {
		keep = tasks.Retention{Tenants: map[string]time.Duration{*tenant: *olderThan}}
	}
	rep, err := handoff.PurgeStores(ctx, cfg, keep, !*yes)
	if err != nil {
		return fmt.Errorf("store purge: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	if len(rep.Tasks) > 0 {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSTATE\tSTATUS CHANGED\tPRINCIPAL\tTENANT")
		for _, t := range rep.Tasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.State, t.Updated.UTC().Format(time.RFC3339), t.Owner.Principal, t.Owner.Tenant)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if !rep.Deleted {
		fmt.Fprintf(stdout, "dry run: %d finished tasks older than %s would be deleted; nothing was changed. Run again with --yes to delete them.\n", len(rep.Tasks), *olderThan)
		return nil
	}
	fmt.Fprintf(stdout, "deleted %d finished tasks older than %s, and %d blobs no kept task names\n", len(rep.Tasks), *olderThan, len(rep.Blobs))
	return nil
}
