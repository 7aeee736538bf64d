package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// runPush dispatches "handoff push status".
func runPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			printSynopses(stdout, "push")
			return nil
		}
		return usagef("push: want the subcommand status")
	}
	fs := newFlagSet("push status", stdout)
	dataDir := fs.String("data-dir", "", "read the store of a stopped agent in `DIR` directly")
	out := addOutputFlags(fs, "give up after `D`")
	rest, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	var statuses []push.Status
	switch {
	case *dataDir != "" && len(rest) == 0:
		statuses, err = localPushStatus(ctx, *dataDir)
	case *dataDir == "" && len(rest) == 1:
		statuses, err = remotePushStatus(ctx, rest[0], out)
	default:
		return usagef("push status: give the agent's URL or --data-dir, not both")
	}
	if err != nil {
		return err
	}
	if out.json {
		return writeJSONLines(stdout, statuses)
	}
	return push.WriteStatusTable(stdout, statuses)
}

// localPushStatus reads every push config of a stopped agent's store. It
// has none of the agent's keys: sealed secrets are listed masked.
func localPushStatus(ctx context.Context, dir string) ([]push.Status, error) {
	path, err := datadir.Find(dir, datadir.TaskStore)
	if err != nil || path == "" {
		return nil, err
	}
	store, err := boltstore.Open(path, time.Second, boltstore.WithSealer(tasks.ListingSealer()))
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("the agent using %s is running: ask it with handoff push status URL", dir)
	}
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return push.Statuses(ctx, store, nil)
}

// remotePushStatus asks a running agent for the caller's own push configs.
func remotePushStatus(ctx context.Context, raw string, o *outputFlags) ([]push.Status, error) {
	var body struct {
		Configs []push.Status `json:"configs"`
	}
	if err := getAgentJSON(ctx, raw, "/a2a/push/status", nil, o, &body); err != nil {
		return nil, fmt.Errorf("push status: %w", err)
	}
	return body.Configs, nil
}
