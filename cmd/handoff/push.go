package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	bolt "go.etcd.io/bbolt"

	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/push"
	"github.com/handoff-a2a/handoff/tasks"
	"github.com/handoff-a2a/handoff/tasks/boltstore"
)

// runPush dispatches "handoff push status" and "handoff push retry".
func runPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "retry" {
		return runPushRetry(ctx, args[1:], stdout)
	}
	if len(args) == 0 || args[0] != "status" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			printSynopses(stdout, "push")
			return nil
		}
		return usagef("push: want the subcommand status or retry")
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

// runPushRetry implements "handoff push retry URL TASK_ID --config ID
// [--seq N]": the caller asks the agent to send a dead letter of one of its
// own push configs again (--seq, or every one without it), or to try the
// event being retried now. The agent's delivery worker sends it.
func runPushRetry(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("push retry", stdout)
	config := fs.String("config", "", "the task's push config `ID` (required)")
	seq := fs.Uint64("seq", 0, "the event `N` to deliver (a dead letter, or the one being retried); without it, every dead letter of the config and the event being retried")
	out := addOutputFlags(fs, "give up after `D`")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("push retry", pos, "URL", "TASK_ID"); err != nil {
		return err
	}
	if *config == "" {
		return usagef("push retry: --config ID is required (handoff push status URL lists the configs)")
	}
	body, err := json.Marshal(map[string]any{"task_id": pos[1], "config_id": *config, "seq": *seq})
	if err != nil {
		return err
	}
	var answer struct {
		TaskID   a2a.TaskID `json:"task_id"`
		ConfigID string     `json:"config_id"`
		Retry    struct {
			ID  string `json:"id"`
			Seq uint64 `json:"seq"`
			By  string `json:"by"`
		} `json:"retry"`
	}
	if err := postAgentJSON(ctx, pos[0], "/a2a/push/retry", body, out, &answer); err != nil {
		return fmt.Errorf("push retry: %w", err)
	}
	if out.json {
		return writeJSONLine(stdout, answer)
	}
	what := "every dead letter and the delivery being retried"
	if answer.Retry.Seq != 0 {
		what = fmt.Sprintf("event %d", answer.Retry.Seq)
	}
	_, err = fmt.Fprintf(stdout, "retry of %s of task %s, config %s, requested as %s (request %s); handoff push status URL shows when it is delivered\n",
		what, answer.TaskID, answer.ConfigID, answer.Retry.By, answer.Retry.ID)
	return err
}

// postAgentJSON POSTs body to one of the agent's own JSON endpoints with
// the caller's credentials and decodes a 2xx answer into out.
func postAgentJSON(ctx context.Context, raw, path string, body []byte, o *outputFlags, out any) error {
	base, err := parseAgentURL(raw)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	var card *a2a.AgentCard
	if o.apiKey != "" || o.trust != "" { // the card names the API key's header
		if card, err = resolveCard(ctx, base, o); err != nil {
			return err
		}
	}
	u := base.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = credentialHeaders(card, o)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("HTTP %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode the answer of %s: %w", u.Redacted(), err)
	}
	return nil
}
