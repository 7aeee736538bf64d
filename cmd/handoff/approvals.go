package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/handoff-a2a/handoff"
)

// pendingApproval is one entry of the agent's GET /a2a/approvals.
type pendingApproval struct {
	TaskID      string         `json:"task_id"`
	Tool        string         `json:"tool"`
	Effect      string         `json:"effect,omitempty"`
	Risk        string         `json:"risk,omitempty"`
	Arguments   map[string]any `json:"arguments,omitempty"`
	RequestedBy string         `json:"requested_by"`
	Tenant      string         `json:"tenant,omitempty"`
	Reason      string         `json:"reason,omitempty"`
	Since       time.Time      `json:"since"`
	MayDecide   bool           `json:"may_decide"`
	// Request is what an approval echoes; only approvers get it.
	Request *struct {
		Tool            string `json:"tool"`
		SnapshotVersion string `json:"snapshot_version"`
		Digest          string `json:"digest"`
		Token           string `json:"token"`
	} `json:"request,omitempty"`
}

// listApprovals asks a running agent for the calls waiting for approval
// that the caller may see.
func listApprovals(ctx context.Context, raw string, o *outputFlags) ([]pendingApproval, error) {
	var body struct {
		Approvals []pendingApproval `json:"approvals"`
	}
	if err := getAgentJSON(ctx, raw, "/a2a/approvals", nil, o, &body); err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return body.Approvals, nil
}

// runApprovals implements "handoff approvals URL": the tool calls waiting
// for an approval (every one for an approver, the caller's own otherwise).
func runApprovals(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlagSet("approvals", stdout)
	out := addOutputFlags(fs, "give up after `D`")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("approvals", pos, "URL"); err != nil {
		return err
	}
	list, err := listApprovals(ctx, pos[0], out)
	if err != nil {
		return err
	}
	if out.json {
		for i := range list {
			list[i].Request = nil // the token is for "handoff approve", not for output
		}
		return writeJSONLines(stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "nothing waits for approval")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tTOOL\tRISK\tASKED BY\tWAITING SINCE\tREASON")
	for _, a := range list {
		risk := strings.Trim(a.Risk+" "+a.Effect, " ")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.TaskID, a.Tool, risk, a.RequestedBy, a.Since.Format(time.RFC3339), a.Reason)
	}
	return tw.Flush()
}

// runApprove implements "handoff approve URL TASK_ID": it approves the
// task's waiting tool call by sending the approval message as the caller.
func runApprove(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlagSet("approve", stdout)
	scope := fs.String("scope", "once", "how far the approval reaches: `once` (this call), task (the tool's calls by the same caller for the rest of the task) or scope (its calls on resources under --resource until --expires)")
	resource := fs.String("resource", "", "with --scope scope: the path or URL `PREFIX` the grant covers")
	expires := fs.Duration("expires", 0, "with --scope scope: how long the grant lasts, `D` from now (required)")
	out := addOutputFlags(fs, "give up after `D`; 0 waits forever")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("approve", pos, "URL", "TASK_ID"); err != nil {
		return err
	}
	grant := handoff.ApprovalScope{Scope: *scope, Resource: *resource}
	switch *scope {
	case "once", "task":
		if *resource != "" || *expires != 0 {
			return usagef("approve: --resource and --expires are for --scope scope")
		}
	case "scope":
		if *resource == "" || *expires <= 0 {
			return usagef("approve: --scope scope needs --resource PREFIX and --expires D")
		}
		grant.Expires = time.Now().Add(*expires)
	default:
		return usagef("approve: --scope %q is not once, task or scope", *scope)
	}
	return decideApproval(ctx, pos[0], a2a.TaskID(pos[1]), true, "", grant, out, stdout)
}

// runDeny implements "handoff deny URL TASK_ID --reason TEXT": the task's
// waiting tool call is not run, and the task fails with the reason.
func runDeny(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlagSet("deny", stdout)
	reason := fs.String("reason", "", "why, in `TEXT` the caller sees (required)")
	out := addOutputFlags(fs, "give up after `D`; 0 waits forever")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if err := expectArgs("deny", pos, "URL", "TASK_ID"); err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("deny: --reason is required")
	}
	return decideApproval(ctx, pos[0], a2a.TaskID(pos[1]), false, *reason, handoff.ApprovalScope{}, out, stdout)
}

// decideApproval finds the task's approval request and answers it with
// the approval message, the one an approver could send by hand.
func decideApproval(ctx context.Context, raw string, id a2a.TaskID, approve bool, reason string, grant handoff.ApprovalScope, o *outputFlags, stdout io.Writer) error {
	verb := "deny"
	if approve {
		verb = "approve"
	}
	list, err := listApprovals(ctx, raw, o)
	if err != nil {
		return err
	}
	var found *pendingApproval
	for i := range list {
		if list[i].TaskID == string(id) {
			found = &list[i]
		}
	}
	switch {
	case found == nil:
		return fmt.Errorf("%s: task %s waits for no approval this caller may see", verb, id)
	case found.Request == nil:
		return fmt.Errorf("%s: task %s: this caller may not approve tool calls", verb, id)
	}
	base, err := parseAgentURL(raw)
	if err != nil {
		return err
	}
	r := found.Request
	msg := handoff.ApprovalMessage(id, r.Tool, r.SnapshotVersion, r.Digest, r.Token, grant, approve, reason)
	op := verb + " task " + string(id)
	callCtx, cancel := withTimeout(ctx, o.timeout)
	defer cancel()
	client, err := connect(callCtx, base, o)
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	defer destroy(client)
	res, err := client.SendMessage(callCtx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return callError(ctx, callCtx, op, err)
	}
	t, ok := res.(*a2a.Task)
	if !ok {
		return fmt.Errorf("%s: the agent answered with a message, not the task", op)
	}
	if o.json {
		return writeJSONLine(stdout, a2a.StreamResponse{Event: t})
	}
	fmt.Fprintf(stdout, "task %s: %s\n", t.ID, stateName(t.Status.State))
	return nil
}
