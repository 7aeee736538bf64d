package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// runStore dispatches "handoff store recover|stats|purge".
func runStore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "help":
			printSynopses(stdout, "store")
			return nil
		case "recover":
			return runStoreRecover(ctx, args, stdout)
		case "stats":
			return runStoreStats(ctx, args, stdout)
		case "purge":
			return runStorePurge(ctx, args, stdout)
		}
	}
	return usagef("store: want the subcommand recover, stats or purge")
}

// runStoreRecover is "handoff store recover".
func runStoreRecover(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("store recover", stdout)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "Usage: handoff store recover %s\n\n", synopsis("store recover"))
		fmt.Fprint(stdout, `Recover the embedded task store of a stopped agent whose write-ahead log is
damaged ("handoff serve" refuses to start on it, naming the file and the
offset). It reads the log as starting would and reports what recovering
gives up: each part of the log that cannot be read or is missing (file,
offset, bytes, the log records it held), and each task that loses versions
(its id, the last version the store keeps, the versions lost: once one of a
task's versions is missing, its later ones cannot apply).

By default this is a dry run: nothing on disk changes. With --apply it
applies every record it can, drops the rest, and deletes the log, so that
the agent starts. A damaged tasks.db is not repaired: restore it from a
backup.
`)
		printFlags(stdout, fs)
	}
	dataDir := fs.String("data-dir", "", "the agent's data `DIR` (the agent must be stopped)")
	apply := fs.Bool("apply", false, "drop what cannot be recovered and make the store startable (default: a dry run that changes nothing)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	rest, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	if len(rest) > 0 || *dataDir == "" {
		return usagef("store recover: want --data-dir DIR")
	}
	// A log without its store file is one to recover, so only a directory
	// without any agent data is refused here.
	if err := datadir.Check(*dataDir); err != nil {
		return fmt.Errorf("store recover: %w", err)
	}
	path := filepath.Join(*dataDir, datadir.TaskStore)
	r, err := boltstore.Recover(path, time.Second, *apply)
	if errors.Is(err, bolt.ErrTimeout) {
		return fmt.Errorf("store recover: the agent using %s is running: stop it first", *dataDir)
	}
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store recover: no task store in %s (no %s, no log)", *dataDir, datadir.TaskStore)
	}
	if err != nil {
		return fmt.Errorf("store recover: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(r)
	}
	return writeRecovery(stdout, path, r)
}

// writeRecovery prints a recovery's report for an operator.
func writeRecovery(w io.Writer, path string, r *boltstore.Recovery) error {
	fmt.Fprintf(w, "task store %s: it holds log records up to %d; %d more to apply\n", path, r.Applied, r.Replay)
	if r.Lossless() {
		if r.Written {
			fmt.Fprintln(w, "the log was whole: nothing dropped; applied, the log deleted")
		} else {
			fmt.Fprintln(w, "the log is whole: nothing to drop (starting the agent applies it)")
		}
		return nil
	}
	if len(r.Damage) > 0 {
		fmt.Fprintln(w, "\nlog damage:")
		for _, d := range r.Damage {
			fmt.Fprintf(w, "  %s offset %d: %s\n", d.File, d.Offset, describeDamage(d))
		}
		fmt.Fprintln(w, "  (the task of a record that is missing or cannot be read is named below only when a later")
		fmt.Fprintln(w, "  version of it, or the damaged record itself, can still be read)")
	}
	if len(r.Tasks) > 0 {
		fmt.Fprintln(w, "\ntasks that lose versions:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  TASK\tLAST GOOD VERSION\tVERSIONS LOST")
		for _, t := range r.Tasks {
			good := strconv.FormatUint(t.LastGood, 10)
			if t.LastGood == 0 {
				good = "none (the task is gone)"
			}
			lost := make([]string, len(t.Lost))
			for i, v := range t.Lost {
				lost[i] = strconv.FormatUint(v, 10)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.ID, good, strings.Join(lost, ", "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	if r.Written {
		fmt.Fprintf(w, "recovered: %d records applied, the above dropped, the log deleted; the agent starts now\n", r.Replay)
	} else {
		fmt.Fprintln(w, "dry run: nothing was changed. Run again with --apply to drop the above and make the store startable.")
	}
	return nil
}

// describeDamage says what a damaged part of the log held.
func describeDamage(d boltstore.LogDamage) string {
	var held string
	switch {
	case d.To == 0:
		held = fmt.Sprintf("log records from %d on", d.From)
	case d.To < d.From:
		held = "no log record the store lacks"
	case d.To == d.From:
		held = fmt.Sprintf("log record %d", d.From)
	default:
		held = fmt.Sprintf("log records %d to %d", d.From, d.To)
	}
	switch {
	case d.Torn:
		return fmt.Sprintf("%d bytes, the end of a write a crash cut short (%s, never acknowledged if a crash cut them)", d.Bytes, held)
	case d.Missing:
		return fmt.Sprintf("%s are missing: no log segment holds them (a deleted segment?)", held)
	}
	return fmt.Sprintf("%d bytes cannot be read (%s)", d.Bytes, held)
}
