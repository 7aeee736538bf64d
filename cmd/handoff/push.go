package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// runPush dispatches "handoff push status".
func runPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, "Usage: handoff push status URL|--data-dir DIR [--json]")
			return nil
		}
		return usagef("push: want the subcommand status")
	}
	fs := newFlagSet("push status", "URL|--data-dir DIR [--json] [--api-key KEY] [--token JWT]", stdout)
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
		return json.NewEncoder(stdout).Encode(statuses)
	}
	return push.WriteStatusTable(stdout, statuses)
}

// localPushStatus reads every push config of a stopped agent's store. It
// has none of the agent's keys: sealed secrets are listed masked.
func localPushStatus(ctx context.Context, dir string) ([]push.Status, error) {
	store, err := boltstore.Open(filepath.Join(dir, "tasks.db"), time.Second, boltstore.WithSealer(tasks.ListingSealer()))
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

// getAgentJSON GETs one of the agent's own JSON endpoints with the
// caller's credentials and decodes the answer into out.
func getAgentJSON(ctx context.Context, raw, path string, query url.Values, o *outputFlags, out any) error {
	base, err := parseAgentURL(raw)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	u := base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	if o.apiKey != "" {
		req.Header.Set("X-API-Key", o.apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("HTTP %s: %s", resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
