package handoff

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
)

// reloadable are the config keys Reload applies; every other change needs
// a restart.
var reloadable = []string{"mcp_servers", "tool_contracts", "approvers", "policy"}

// Reload applies the MCP part of a new config while the agent serves, as
// `handoff serve` does on SIGHUP: mcp_servers (servers added, removed or
// changed are started, stopped or restarted; unchanged ones keep their
// session; the catalog gets a new snapshot), tool_contracts, policy and
// approvers (replaced whole; calls already running finish under the old
// ones, and their audit records name the policy version they ran under). next
// must come from [LoadConfig] or [ParseConfig], which validate it. If the
// MCP part is refused (a server or contract the tool pipeline rejects),
// nothing changes and the error says why. Changes to any other key are not
// applied: they are logged as needing a restart, as is adding mcp_servers
// to an agent that started without any.
func (a *Agent) Reload(next *Config) error {
	var restart []string
	switch {
	case a.tools != nil:
		if err := a.tools.reload(next); err != nil {
			return fmt.Errorf("reload refused: %w", err)
		}
	case len(next.MCPServers) > 0 || len(next.ToolContracts) > 0:
		restart = append(restart, "mcp_servers")
	}
	if err := a.hooks.reload(next); err != nil { // next is validated: not expected
		return err
	}
	approvers := slices.Clone(next.Approvers)
	a.approvers.Store(&approvers)
	restart = append(restart, changedKeys(a.cfg, next)...)
	if len(restart) > 0 {
		a.log.Warn("config reload: these changes need a restart and were not applied", slog.String("keys", strings.Join(restart, ",")))
	}
	a.log.Info("config reloaded", slog.Int("mcp_servers", len(next.MCPServers)),
		slog.Int("tool_contracts", len(next.ToolContracts)), slog.Int("approvers", len(next.Approvers)))
	return nil
}

// changedKeys names the top-level keys, other than the reloadable ones,
// whose values differ between two configs.
func changedKeys(old, next *Config) []string {
	var keys []string
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(next).Elem()
	for i := range ov.NumField() {
		f := ov.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || slices.Contains(reloadable, key) {
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			keys = append(keys, key)
		}
	}
	return keys
}

// isApprover reports whether a principal may approve tool calls and see
// every task's audit, under the approvers in force (the last reload's).
func (a *Agent) isApprover(name string) bool {
	return name != "" && slices.Contains(*a.approvers.Load(), name)
}
