package handoff

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"

	"github.com/handoff-a2a/handoff/internal/auth"
	"github.com/handoff-a2a/handoff/mcp"
)

// tools is the agent's MCP side: its servers' catalog and the governed
// pipeline every tool call goes through.
type tools struct {
	manager  *mcp.Manager
	pipeline *mcp.Pipeline
	audit    *mcp.BoltAudit
}

// newTools builds the MCP manager and pipeline from the config; nil when the
// agent has no MCP servers.
func newTools(c *Config, log *slog.Logger) (*tools, error) {
	if len(c.MCPServers) == 0 {
		for _, s := range c.Skills {
			if s.Executor == "mcp" {
				return nil, fmt.Errorf("%s: skill %s uses an MCP tool but mcp_servers is empty", c.path, s.ID)
			}
		}
		return nil, nil
	}
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
	m, err := mcp.NewManager(servers, mcp.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("%s: mcp_servers: %w", c.path, err)
	}
	contracts := make([]mcp.Contract, 0, len(c.ToolContracts))
	for _, tc := range c.ToolContracts {
		ct := mcp.Contract{Tool: tc.Tool, Effect: mcp.Effect(tc.Effect), Risk: mcp.Risk(tc.Risk),
			Approval: mcp.ApprovalMode(tc.Approval), Redact: tc.Redact, OutputSchema: tc.OutputSchema,
			Idempotency: mcp.IdempotencyScope(tc.Idempotency)}
		if tc.Timeout != nil {
			ct.Timeout = tc.Timeout.Duration
		}
		contracts = append(contracts, ct)
	}
	audit, err := mcp.OpenBoltAudit(filepath.Join(c.DataDir, "audit.db"))
	if err != nil {
		return nil, err
	}
	p, err := mcp.NewPipeline(m, contracts, audit, mcp.WithApprovers(c.Approvers...))
	if err != nil {
		audit.Close()
		return nil, fmt.Errorf("%s: tool_contracts: %w", c.path, err)
	}
	return &tools{manager: m, pipeline: p, audit: audit}, nil
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
	approver := name != "" && slices.Contains(a.cfg.Approvers, name)
	for _, rec := range recs {
		if approver || rec.Principal == name {
			out = append(out, rec)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"records": out})
}
