package handoff

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/internal/datadir"
	"github.com/handoff-a2a/handoff/internal/skill"
	"github.com/handoff-a2a/handoff/mcp"
)

// tools is the agent's MCP side: its servers' catalog and the governed
// pipeline every tool call goes through.
type tools struct {
	manager  *mcp.Manager
	pipeline *mcp.Pipeline
	audit    auditLog
	grants   mcp.GrantStore // beside the audit log, on the same store
	log      *slog.Logger

	reloading sync.Mutex // one reload at a time: the pipeline and the servers change together
}

// governed is the MCP side as the executors use it; nil for an agent
// without MCP servers (t nil).
func (t *tools) governed() *skill.MCP {
	if t == nil {
		return nil
	}
	return &skill.MCP{Manager: t.manager, Pipeline: t.pipeline, Audit: t.audit}
}

// auditLog is the tool calls' audit log with its Close: bbolt in the data
// directory, or Redis.
type auditLog interface {
	mcp.AuditLog
	Close() error
}

// openAudit opens the audit log on rdb (the task store's Redis, shared by
// the replicas) or, with none, in the data directory.
func openAudit(c *Config, rdb redis.UniversalClient) (auditLog, error) {
	if rdb != nil {
		return mcp.NewRedisAudit(rdb, c.Store.Namespace)
	}
	return mcp.OpenBoltAudit(filepath.Join(c.DataDir, datadir.AuditLog))
}

// newTools builds the MCP manager and pipeline from the config; nil when the
// agent has no MCP servers. rdb is the task store's Redis, nil on the
// embedded store.
func newTools(c *Config, rdb redis.UniversalClient, log *slog.Logger, tel telemetry) (*tools, error) {
	if len(c.MCPServers) == 0 {
		for _, s := range allSkills(c) {
			if s.Executor == "mcp" {
				return nil, fmt.Errorf("%s: skill %s uses an MCP tool but mcp_servers is empty", c.path, s.ID)
			}
		}
		return nil, nil
	}
	mopts := []mcp.ManagerOption{mcp.WithLogger(log)}
	if tel.tracing != nil { // traceparent into MCP HTTP requests
		mopts = append(mopts, mcp.WithHTTPClient(&http.Client{Transport: tel.tracing.Transport(nil)}))
	}
	m, err := mcp.NewManager(serverConfigs(c), mopts...)
	if err != nil {
		return nil, fmt.Errorf("%s: mcp_servers: %w", c.path, err)
	}
	contracts := toolContracts(c)
	audit, err := openAudit(c, rdb)
	if err != nil {
		return nil, err
	}
	grants, err := openGrants(c, rdb, audit) // from the store itself: the bbolt audit file holds them
	if err != nil {
		audit.Close()
		return nil, err
	}
	if tel.metrics != nil || tel.tracing != nil {
		audit = observedAudit{audit, tel.metrics, tel.tracer()}
	}
	p, err := mcp.NewPipeline(m, contracts, audit, pipelineOptions(c, grants, log)...)
	if err != nil {
		audit.Close()
		return nil, fmt.Errorf("%s: tool_contracts: %w", c.path, err)
	}
	return &tools{manager: m, pipeline: p, audit: audit, grants: grants, log: log}, nil
}

// serverConfigs maps the config's mcp_servers onto the Manager's configs.
func serverConfigs(c *Config) []mcp.ServerConfig {
	servers := make([]mcp.ServerConfig, 0, len(c.MCPServers))
	for _, s := range c.MCPServers {
		sc := mcp.ServerConfig{Name: s.Name, Transport: mcp.TransportStdio, Command: s.Command, Args: s.Args, Dir: s.Dir,
			InheritEnv: s.InheritEnv, Env: s.Env, URL: s.URL, Headers: s.Headers, Allow: s.Allow, Deny: s.Deny}
		if s.Transport == "http" {
			sc.Transport = mcp.TransportHTTP
		}
		if s.ConnectTimeout != nil {
			sc.ConnectTimeout = s.ConnectTimeout.Duration
		}
		servers = append(servers, sc)
	}
	return servers
}

// toolContracts maps the config's tool_contracts onto the pipeline's.
func toolContracts(c *Config) []mcp.Contract {
	contracts := make([]mcp.Contract, 0, len(c.ToolContracts))
	for _, tc := range c.ToolContracts {
		ct := mcp.Contract{Tool: tc.Tool, Effect: mcp.Effect(tc.Effect), Risk: mcp.Risk(tc.Risk),
			Approval: mcp.ApprovalMode(tc.Approval), Redact: tc.Redact, OutputSchema: tc.OutputSchema,
			Idempotency: mcp.IdempotencyScope(tc.Idempotency), Resources: tc.Resources, Tags: tc.Tags}
		if tc.Timeout != nil {
			ct.Timeout = tc.Timeout.Duration
		}
		contracts = append(contracts, ct)
	}
	return contracts
}

// reload applies a new config's mcp_servers, tool_contracts and approvers.
// Both sets are checked before either is applied, so a refused config
// changes nothing.
func (t *tools) reload(c *Config) error {
	t.reloading.Lock()
	defer t.reloading.Unlock()
	servers := serverConfigs(c)
	if err := mcp.CheckServers(servers); err != nil {
		return fmt.Errorf("%s: mcp_servers: %w", c.path, err)
	}
	if err := t.pipeline.Reconfigure(toolContracts(c), pipelineOptions(c, t.grants, t.log)...); err != nil {
		return fmt.Errorf("%s: tool_contracts: %w", c.path, err)
	}
	if err := t.manager.Reconfigure(servers); err != nil { // checked above: not expected
		return fmt.Errorf("%s: mcp_servers: %w", c.path, err)
	}
	return nil
}

// auditList answers GET /a2a/audit: the tool calls of the caller's own
// requests, or every call for an approver; ?task= narrows to one task.
func (a *Agent) auditList(w http.ResponseWriter, r *http.Request) {
	if a.tools == nil {
		writeRESTError(w, http.StatusNotFound, "NOT_FOUND", "UNSUPPORTED_OPERATION", "this agent has no MCP tools, so no audit log")
		return
	}
	f := mcp.AuditFilter{TaskID: r.URL.Query().Get("task"), Limit: 1000}
	name := ""
	if p, ok := auth.PrincipalFrom(r.Context()); ok {
		name = p.Name
	}
	recs, err := a.tools.audit.List(r.Context(), f)
	if err != nil {
		a.log.Error("audit list", slog.Any("error", err))
		http.Error(w, "the audit log could not be read", http.StatusInternalServerError)
		return
	}
	out := []mcp.AuditRecord{}
	approver := a.isApprover(name)
	for _, rec := range recs {
		if approver || rec.Principal == name {
			out = append(out, rec)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"records": out})
}
