package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/mcp"
)

// runAudit lists the tool-call audit records: a running agent's (the
// caller's own, or all for an approver) or a stopped agent's data directory.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit", stdout)
	dataDir := fs.String("data-dir", "", "read the audit log of a stopped agent in `DIR`")
	task := fs.String("task", "", "only the calls of the task with this `ID`")
	out := addOutputFlags(fs, "give up after `D`")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	var recs []mcp.AuditRecord
	switch {
	case *dataDir != "" && len(rest) == 0:
		if recs, err = localAudit(ctx, *dataDir, *task); err != nil {
			return err
		}
	case *dataDir == "" && len(rest) == 1:
		if recs, err = remoteAudit(ctx, rest[0], *task, out); err != nil {
			return err
		}
	default:
		return usagef("audit: give the agent's URL or --data-dir, not both")
	}
	if out.json {
		return writeJSONLines(stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(stdout, "no tool calls")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTASK\tTOOL\tDECISION\tAPPROVER\tOUTCOME\tDURATION")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Format(time.RFC3339), r.TaskID, r.Tool, r.Decision, r.Approver, r.Outcome, r.Duration.Round(time.Millisecond))
	}
	return tw.Flush()
}

// localAudit reads the audit log of the stopped agent whose data is in dir;
// an agent without MCP servers has none, hence no calls.
func localAudit(ctx context.Context, dir, task string) ([]mcp.AuditRecord, error) {
	path, err := datadir.Find(dir, datadir.AuditLog)
	if err != nil || path == "" {
		return nil, err
	}
	log, err := mcp.OpenBoltAudit(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log (is the agent running? then ask it by URL): %w", err)
	}
	defer log.Close()
	return log.List(ctx, mcp.AuditFilter{TaskID: task})
}

// remoteAudit asks a running agent for the tool calls the caller may see.
func remoteAudit(ctx context.Context, raw, task string, o *outputFlags) ([]mcp.AuditRecord, error) {
	var q url.Values
	if task != "" {
		q = url.Values{"task": {task}}
	}
	var body struct {
		Records []mcp.AuditRecord `json:"records"`
	}
	if err := getAgentJSON(ctx, raw, "/a2a/audit", q, o, &body); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return body.Records, nil
}
