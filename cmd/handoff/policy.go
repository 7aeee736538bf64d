package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

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
			return runPolicyExplain(ctx, args[1:], stdout)
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
// call, and the hooks it would run, without running anything or connecting
// to any MCP server. The caller's grants are read, read only, from the
// config's store unless --no-grants says not to.
func runPolicyExplain(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy explain", stdout)
	configPath := fs.String("config", "", "the agent's YAML config `FILE` (required)")
	tool := fs.String("tool", "", "the tool's catalog `NAME`, server__tool (required)")
	argsJSON := fs.String("args", "{}", "the call's arguments, a `JSON` object")
	caller := fs.String("caller", "", "the calling `PRINCIPAL` (key:NAME, jwt:ISSUER#SUBJECT)")
	tenant := fs.String("tenant", "", "the caller's `TENANT`")
	skill := fs.String("skill", "", "the `SKILL` id the call serves")
	task := fs.String("task", "", "the task `ID` (its task grants count)")
	dataDir := fs.String("data-dir", "", "read grants from data `DIR`; overrides the config's data_dir")
	store := fs.String("store", "", "read grants from Redis at this URL (`redis://HOST:PORT/DB`); overrides the config's store")
	noGrants := fs.Bool("no-grants", false, "consult no grants: explain the configured policy alone")
	asJSON := fs.Bool("json", false, "print the decision as one JSON object and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *configPath == "" || *tool == "" {
		return usagef("policy explain: want --config FILE --tool NAME and no other arguments")
	}
	if *noGrants && (*dataDir != "" || *store != "") {
		return usagef("policy explain: --no-grants reads no store: give it without --data-dir and --store")
	}
	var callArgs map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &callArgs); err != nil {
		return usagef("policy explain: --args is not a JSON object: %v", err)
	}
	cfg, err := loadGrantsConfig(*configPath, *dataDir, *store)
	if err != nil {
		return err
	}
	var grants mcp.GrantStore
	if !*noGrants {
		g, closeGrants, err := openConfigGrants(cfg)
		switch {
		case errors.Is(err, datadir.ErrNoAgentData): // an agent that never ran has no grants
		case err != nil:
			return fmt.Errorf("%w (or give --no-grants)", err)
		default:
			defer closeGrants()
			grants = g
		}
	}
	x, err := cfg.ExplainToolCallContext(ctx, mcp.Proposal{TaskID: *task, Principal: *caller, Tenant: *tenant, Skill: *skill, Tool: *tool, Arguments: callArgs}, grants)
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
	hooks := "none"
	if len(x.Hooks) > 0 {
		var names []string
		for _, h := range x.Hooks {
			names = append(names, fmt.Sprintf("%s (%s)", h.Name, h.Point))
		}
		hooks = strings.Join(names, ", ") + "; not run"
	}
	writeField(stdout, "hooks", hooks)
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

// loadGrantsConfig loads the config at path with --data-dir and --store
// applied over it, as serve applies them.
func loadGrantsConfig(path, dataDir, store string) (*handoff.Config, error) {
	if store != "" && !strings.HasPrefix(store, "redis://") && !strings.HasPrefix(store, "rediss://") {
		return nil, usagef("--store %q is not a redis:// URL", store)
	}
	cfg, err := handoff.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if dataDir != "" {
		cfg.DataDir = dataDir
	}
	if store != "" {
		cfg.Store.Kind, cfg.Store.URL = "redis", store
	}
	return cfg, nil
}

// openConfigGrants opens the grants where the agent of cfg keeps them: in
// its Redis under its namespace, or in the audit log of its data
// directory (an error wrapping datadir.ErrNoAgentData when that holds no
// agent's data; a nil store when it holds no audit log). close releases
// what it opened.
func openConfigGrants(cfg *handoff.Config) (store mcp.GrantStore, close func(), err error) {
	if cfg.Store.Kind != "redis" {
		return openDataDirGrants(cfg.DataDir)
	}
	opts, err := redis.ParseURL(cfg.Store.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("grants: store url: %w", err)
	}
	rdb := redis.NewClient(opts)
	g, err := mcp.NewRedisGrants(rdb, cfg.Store.Namespace)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return g, func() { rdb.Close() }, nil
}

// openDataDirGrants opens the grants in the audit log of data directory
// dir; an agent without MCP tools has none: a nil store.
func openDataDirGrants(dir string) (mcp.GrantStore, func(), error) {
	path, err := datadir.Find(dir, datadir.AuditLog)
	if err != nil {
		return nil, nil, err
	}
	if path == "" {
		return nil, func() {}, nil
	}
	audit, err := mcp.OpenBoltAudit(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open grants (is the agent running? its embedded store is held: stop it first): %w", err)
	}
	return audit.Grants(), func() { audit.Close() }, nil
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

// runPolicyGrants lists, or revokes one of, the grants approvers gave: in
// the data directory of a stopped agent on the embedded store, or where the
// agent of a config keeps them (its Redis, which a running agent shares;
// or its data directory).
func runPolicyGrants(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("policy grants", stdout)
	dataDir := fs.String("data-dir", "", "the grants of a stopped agent on the embedded store in `DIR`")
	configPath := fs.String("config", "", "the grants where the agent of this YAML config `FILE` keeps them")
	storeURL := fs.String("store", "", "with --config: Redis at this URL (`redis://HOST:PORT/DB`); overrides the config's store")
	revoke := fs.String("revoke", "", "revoke the grant with this `ID` instead of listing")
	asJSON := fs.Bool("json", false, "print JSON, one grant a line, and nothing else")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || (*dataDir == "") == (*configPath == "") || (*storeURL != "" && *configPath == "") {
		return usagef("policy grants: want --data-dir DIR, or --config FILE [--store URL], and nothing else")
	}
	var store mcp.GrantStore
	var closeStore func()
	if *dataDir != "" {
		if path, err := datadir.Find(*dataDir, datadir.AuditLog); err != nil {
			return err
		} else if path == "" {
			return fmt.Errorf("%s: no audit log, so no grants (the agent has no MCP tools)", *dataDir)
		}
		store, closeStore, err = openDataDirGrants(*dataDir)
	} else {
		var cfg *handoff.Config
		if cfg, err = loadGrantsConfig(*configPath, "", *storeURL); err != nil {
			return err
		}
		store, closeStore, err = openConfigGrants(cfg)
	}
	if err != nil {
		return err
	}
	defer closeStore()
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
