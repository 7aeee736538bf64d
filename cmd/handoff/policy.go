package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/handoff-a2a/handoff"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/mcp"
	"github.com/handoff-a2a/handoff/mcp/policy"
)

// runPolicy dispatches "handoff policy explain", "check" and "grants".
func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "explain":
			return runPolicyExplain(args[1:], stdout)
		case "check":
			return runPolicyCheck(args[1:], stdout)
		case "grants":
			return runPolicyGrants(ctx, args[1:], stdout)
		case "-h", "--help", "help":
			printSynopses(stdout, "policy")
			return nil
		}
	}
	return usagef("policy: want the subcommand explain, check or grants")
}

// runPolicyExplain prints what the config's policy decides of one tool
// call, without running it or connecting to any server.
func runPolicyExplain(args []string, stdout io.Writer) error {
	fs := newFlagSet("policy explain", stdout)
	configPath := fs.String("config", "", "the agent's YAML config `FILE` (required)")
	tool := fs.String("tool", "", "the tool's catalog `NAME`, server__tool (required)")
	argsJSON := fs.String("args", "{}", "the call's arguments, a `JSON` object")
	caller := fs.String("caller", "", "the calling `PRINCIPAL` (key:NAME, jwt:ISSUER#SUBJECT)")
	tenant := fs.String("tenant", "", "the caller's `TENANT`")
	skill := fs.String("skill", "", "the `SKILL` id the call serves")
	task := fs.String("task", "", "the task `ID` (for task grants; none are consulted)")
	asJSON := fs.Bool("json", false, "print the decision as one JSON object and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *configPath == "" || *tool == "" {
		return usagef("policy explain: want --config FILE --tool NAME and no other arguments")
	}
	var callArgs map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &callArgs); err != nil {
		return usagef("policy explain: --args is not a JSON object: %v", err)
	}
	cfg, err := handoff.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	x, err := cfg.ExplainToolCall(mcp.Proposal{TaskID: *task, Principal: *caller, Tenant: *tenant, Skill: *skill, Tool: *tool, Arguments: callArgs})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLine(stdout, x)
	}
	writeField(stdout, "decision", string(x.Verdict))
	writeField(stdout, "rule", fmt.Sprintf("%s (layer %s)", x.Rule, x.Layer))
	if x.Reason != "" {
		writeField(stdout, "reason", x.Reason)
	}
	writeField(stdout, "version", x.Version)
	writeField(stdout, "contract", fmt.Sprintf("%s: effect %s, risk %s, approval %s", x.Contract.Tool, x.Contract.Effect, x.Contract.Risk, x.Contract.Approval))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if len(x.Resources) > 0 {
		fmt.Fprintln(tw, "\nRESOURCE\tKIND\tFROM")
		for _, r := range x.Resources {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Value, r.Kind, r.Pointer)
		}
	}
	fmt.Fprintln(tw, "\nMATCHED\tLAYER\tDECISION")
	for _, m := range x.Matched {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Rule, m.Layer, m.Verdict)
	}
	return tw.Flush()
}

// runPolicyCheck validates the config (as serve would) and reports what
// its policy gets wrong without being invalid. Any finding is an error, so
// that a CI job can run it.
func runPolicyCheck(args []string, stdout io.Writer) error {
	fs := newFlagSet("policy check", stdout)
	configPath := fs.String("config", "", "the agent's YAML config `FILE` (required)")
	asJSON := fs.Bool("json", false, "print JSON, one finding a line, and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *configPath == "" {
		return usagef("policy check: want --config FILE and nothing else")
	}
	cfg, err := handoff.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	findings, err := cfg.CheckPolicy()
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSONLines(stdout, findings); err != nil {
			return err
		}
	} else if len(findings) == 0 {
		fmt.Fprintf(stdout, "%s: policy ok\n", *configPath)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tPROBLEM\tDETAIL")
		for _, f := range findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Rule, f.Problem, f.Msg)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(findings) > 0 {
		return fmt.Errorf("%s: the policy has %d finding(s)", *configPath, len(findings))
	}
	return nil
}

// runPolicyGrants lists, or revokes one of, the grants approvers gave, in
// the data directory of a stopped agent on the embedded store.
func runPolicyGrants(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy grants", stdout)
	dataDir := fs.String("data-dir", "", "read the grants of a stopped agent in `DIR` (required)")
	revoke := fs.String("revoke", "", "revoke the grant with this `ID` instead of listing")
	asJSON := fs.Bool("json", false, "print JSON, one grant a line, and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *dataDir == "" {
		return usagef("policy grants: want --data-dir DIR and nothing else")
	}
	path, err := datadir.Find(*dataDir, datadir.AuditLog)
	if err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("%s: no audit log, so no grants (the agent has no MCP tools)", *dataDir)
	}
	audit, err := mcp.OpenBoltAudit(path)
	if err != nil {
		return fmt.Errorf("open grants (is the agent running? stop it first): %w", err)
	}
	defer audit.Close()
	store := audit.Grants()
	if *revoke != "" {
		if err := store.RevokeGrant(ctx, *revoke); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked grant %s\n", *revoke)
		return nil
	}
	grants, err := store.Grants(ctx, mcp.GrantFilter{})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLines(stdout, grants)
	}
	if len(grants) == 0 {
		fmt.Fprintln(stdout, "no grants")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tPRINCIPAL\tTOOL\tTASK/RESOURCE\tAPPROVER\tEXPIRES")
	for _, g := range grants {
		where, expires := g.TaskID, "-"
		if g.Scope == policy.ScopeResource {
			where = g.Resource
		}
		if !g.Expires.IsZero() {
			expires = g.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Scope, g.Principal, g.Tool, where, g.Approver, expires)
	}
	return tw.Flush()
}
